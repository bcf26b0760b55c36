"""Models whose code misbehaves as user code does: each failure must be reported as the model's, in one line."""

from __future__ import annotations

import os
import signal
import sys
import time

import torch
from torch import nn

INPUT_SHAPE = (8,)  # every model here takes a batch of 8-vectors


def _factory(cls: type[nn.Module]):
    """A `module:factory` for `cls`, with the input shape the app reads from a factory."""
    def make() -> nn.Module:
        return cls()

    make.input_shape = INPUT_SHAPE
    return make


class MisbehavesOnARealPass(nn.Module):
    """A small linear model, on meta tensors (the analysis) and real ones, until its `on_pass`-th real pass:
    there `misbehave()` runs instead."""

    on_pass = 1

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(8, 8)
        self.real_passes = 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not x.is_meta:
            self.real_passes += 1
            if self.real_passes == self.on_pass:
                self.misbehave()
        return self.fc(x)

    def misbehave(self) -> None:
        raise NotImplementedError


class FailsOnFifthCall(MisbehavesOnARealPass):
    """Runs four passes, then raises the error type a rejected input raises: the input was fine."""

    on_pass = 5

    def misbehave(self) -> None:
        raise RuntimeError("the model broke on its fifth call")


class ExitsWhenTimed(MisbehavesOnARealPass):
    """Analyses fine on the meta device, then calls sys.exit on its second real pass."""

    on_pass = 2

    def misbehave(self) -> None:
        sys.exit(7)


class KillsItsProcess(MisbehavesOnARealPass):
    """Runs two real passes, then ends its process at once, as a segfault or the OOM killer would."""

    on_pass = 3

    def misbehave(self) -> None:
        os.kill(os.getpid(), signal.SIGKILL)


class IgnoresCancel(MisbehavesOnARealPass):
    """Its second real pass does not return for a minute, as one stuck in native code would not."""

    on_pass = 2

    def misbehave(self) -> None:
        time.sleep(60)


class DividesByZero(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * (1 // 0)


class LooksUpAMissingKey(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return {"a": x}["b"]


class ExitsInForward(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        sys.exit(3)


fails_on_fifth_call = _factory(FailsOnFifthCall)
exits_when_timed = _factory(ExitsWhenTimed)
kills_its_process = _factory(KillsItsProcess)
ignores_cancel = _factory(IgnoresCancel)
divides_by_zero = _factory(DividesByZero)
missing_key = _factory(LooksUpAMissingKey)
exits_in_forward = _factory(ExitsInForward)


def exits_in_factory() -> nn.Module:
    raise SystemExit(4)


def shape_not_a_tuple() -> nn.Module:
    return nn.Linear(8, 8)


shape_not_a_tuple.input_shape = "8"
