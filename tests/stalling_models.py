"""Models that stop making progress, for the deadlines on a job (measure/deadlines.py): one that sleeps for ever in
its build, ones that sleep for ever in a given real pass (meta passes, the analysis's, go through), and one whose
every pass is slow but whose run goes on. Each is a `module:factory` taking a batch of 8-vectors."""

from __future__ import annotations

import time

import torch
from torch import nn

INPUT_SHAPE = (8,)
FOREVER_S = 10 ** 6


def _factory(make):
    make.input_shape = INPUT_SHAPE
    return make


class _SleepsOnPass(nn.Module):
    """A linear model whose `on_pass`-th real pass (1: the first) never returns; `pass_s`: how long each other
    real pass sleeps."""

    def __init__(self, on_pass: int | None, pass_s: float = 0.0) -> None:
        super().__init__()
        self.fc = nn.Linear(8, 8)
        self.on_pass, self.pass_s, self.real_passes = on_pass, pass_s, 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not x.is_meta:
            self.real_passes += 1
            if self.real_passes == self.on_pass:
                time.sleep(FOREVER_S)
            time.sleep(self.pass_s)
        return self.fc(x)


class _SleepsWhenBuilt(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        time.sleep(FOREVER_S)


@_factory
def sleeps_when_built() -> nn.Module:
    return _SleepsWhenBuilt()


@_factory
def sleeps_on_its_first_pass() -> nn.Module:
    return _SleepsOnPass(on_pass=1)


@_factory
def sleeps_on_its_fourth_pass() -> nn.Module:
    """With --warmup 1: the first pass, one of warm-up, one timed, and the second timed one never returns."""
    return _SleepsOnPass(on_pass=4)


@_factory
def slow_but_steady() -> nn.Module:
    """Every pass takes 0.4 s and returns."""
    return _SleepsOnPass(on_pass=None, pass_s=0.4)
