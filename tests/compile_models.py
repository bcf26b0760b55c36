"""A tiny model for the compile tests: one graph break in its forward, so dynamo compiles two frames."""

from __future__ import annotations

import torch
from torch import nn


class BreakingNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Linear(8, 8)
        self.b = nn.Linear(8, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(self.a(x))
        torch._dynamo.graph_break()  # the break the counters must find
        return self.b(y)


def breaking_net() -> nn.Module:
    return BreakingNet()
