"""A model module that sets torch's thread count as it is imported (to 1, or 2 where torch runs on one thread):
the measurement process must say so and run from its own count, not take the module's for its default."""

from __future__ import annotations

import torch

from tests.tinymodels import TinyCNN

SET_TO = 1 if torch.get_num_threads() != 1 else 2
torch.set_num_threads(SET_TO)


def factory() -> torch.nn.Module:
    return TinyCNN()
