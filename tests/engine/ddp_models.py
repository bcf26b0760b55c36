"""Models for the DDP tests, loaded by name in the ranks' own processes (spawned: they import this module again)."""

from __future__ import annotations

import torch.distributed as dist
from torch import nn

from tests.tinymodels import TinyCNN


def fails_on_rank_1() -> nn.Module:
    """Builds on every rank but rank 1, which raises as a model's code that cannot build does; the others wait for
    it as DDP makes rank 0's weights everyone's."""
    if dist.is_initialized() and dist.get_rank() == 1:
        raise RuntimeError("planted build failure\nwith a second line that must not be said")
    return TinyCNN()
