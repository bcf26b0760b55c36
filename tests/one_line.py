"""The one line a bad input is refused with: the error raised by `call(*args)`, checked to be one line."""

from __future__ import annotations

import pytest


def one_line_error(error: type[BaseException], call, *args) -> str:
    with pytest.raises(error) as info:
        call(*args)
    text = str(info.value)
    assert "\n" not in text, text
    return text
