"""Models whose code misbehaves as user code does: each failure must be reported as the model's, in one line."""

from __future__ import annotations

import sys

import torch
from torch import nn


class FailsOnFifthCall(nn.Module):
    """Runs four passes, then raises the error type a rejected input raises: the input was fine."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(8, 8)
        self.calls = 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        if self.calls == 5:
            raise RuntimeError("the model broke on its fifth call")
        return self.fc(x)


def fails_on_fifth_call() -> nn.Module:
    return FailsOnFifthCall()


fails_on_fifth_call.input_shape = (8,)


class DividesByZero(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * (1 // 0)


def divides_by_zero() -> nn.Module:
    return DividesByZero()


divides_by_zero.input_shape = (8,)


class LooksUpAMissingKey(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return {"a": x}["b"]


def missing_key() -> nn.Module:
    return LooksUpAMissingKey()


missing_key.input_shape = (8,)


class ExitsInForward(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        sys.exit(3)


def exits_in_forward() -> nn.Module:
    return ExitsInForward()


exits_in_forward.input_shape = (8,)


def exits_in_factory() -> nn.Module:
    raise SystemExit(4)


def shape_not_a_tuple() -> nn.Module:
    return nn.Linear(8, 8)


shape_not_a_tuple.input_shape = "8"


class ExitsWhenTimed(nn.Module):
    """Analyses fine on the meta device, then calls sys.exit on its second real pass."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(8, 8)
        self.calls = 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not x.is_meta:
            self.calls += 1
            if self.calls == 2:
                sys.exit(7)
        return self.fc(x)


def exits_when_timed() -> nn.Module:
    return ExitsWhenTimed()


exits_when_timed.input_shape = (8,)


class KillsItsProcess(nn.Module):
    """Runs two real passes, then ends its process at once, as a segfault or the OOM killer would."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(8, 8)
        self.calls = 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not x.is_meta:
            self.calls += 1
            if self.calls == 3:
                import os
                import signal

                os.kill(os.getpid(), signal.SIGKILL)
        return self.fc(x)


def kills_its_process() -> nn.Module:
    return KillsItsProcess()


kills_its_process.input_shape = (8,)


class IgnoresCancel(nn.Module):
    """Its second real pass does not return for a minute, as one stuck in native code would not."""

    def __init__(self) -> None:
        super().__init__()
        self.calls = 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not x.is_meta:
            self.calls += 1
            if self.calls == 2:
                import time

                time.sleep(60)
        return x


def ignores_cancel() -> nn.Module:
    return IgnoresCancel()


ignores_cancel.input_shape = (8,)
