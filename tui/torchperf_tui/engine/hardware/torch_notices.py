"""Notices torch logs for torch's own developers, kept out of a user's terminal.

torchao registers its Enums with torch's pytree at import, and torch 2.10+ logs a warning for each ("... is an Enum
subclass and is now natively supported by torch.compile ..."). transformers imports torchao whenever it is installed
(the [quant] extra), so every transformers model would print two such lines before its result. Only that notice is
dropped: anything else the logger says still reaches the user.
"""

from __future__ import annotations

import logging

ENUM_NOTICE = "is an Enum subclass and is now natively supported by torch.compile"
PYTREE_LOGGER = "torch.utils._pytree"


class DropEnumNotice(logging.Filter):
    """Drops torch's notice about an Enum registered with pytree; passes every other record."""

    def filter(self, record: logging.LogRecord) -> bool:
        return ENUM_NOTICE not in record.getMessage()


def quiet_torch_notices() -> None:
    """Install the filter on torch's pytree logger, once (before torch or torchao is imported, or after)."""
    logger = logging.getLogger(PYTREE_LOGGER)
    if not any(isinstance(existing, DropEnumNotice) for existing in logger.filters):
        logger.addFilter(DropEnumNotice())
