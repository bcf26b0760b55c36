"""Models whose code does what only a process of their own can survive: os._exit, a thread that never ends, a
print into the output, a build or forward that blocks. Each is a `module:factory` taking a batch of 8-vectors.

The blocking ones print a line (flushed) as they start blocking, so a test knows when to act (a test may point
TORCHPERF_TEST_MARK at a file that each creates at that moment instead), and swallow Ctrl-C."""

from __future__ import annotations

import os
import threading
import time

import torch
from torch import nn

INPUT_SHAPE = (8,)
BLOCKING = "hostile model: blocking now"


def _block() -> None:
    """Say so, then never return, Ctrl-C or not: as a call stuck in C (a driver, a lock) would not."""
    print(BLOCKING, flush=True)
    mark = os.environ.get("TORCHPERF_TEST_MARK")
    if mark:
        with open(mark, "w"):
            pass
    while True:
        try:
            time.sleep(10**6)
        except KeyboardInterrupt:
            pass


def _factory(make):
    make.input_shape = INPUT_SHAPE
    return make


class _Linear(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(x)


class _ExitsOnARealPass(_Linear):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not x.is_meta:
            os._exit(5)
        return self.fc(x)


class _BlocksOnARealPass(_Linear):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not x.is_meta:
            _block()
        return self.fc(x)


class _BlocksWhenBuilt(_Linear):
    def __init__(self) -> None:
        super().__init__()
        _block()


@_factory
def os_exits_in_factory() -> nn.Module:
    os._exit(4)


@_factory
def os_exits_in_forward() -> nn.Module:
    return _ExitsOnARealPass()


@_factory
def starts_a_thread_that_never_ends() -> nn.Module:
    threading.Thread(target=lambda: time.sleep(10**6), name="never-ends", daemon=False).start()
    return _Linear()


@_factory
def prints_as_it_goes() -> nn.Module:
    print("hello from the factory")

    class Chatty(_Linear):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            print("hello from forward")
            return self.fc(x)

    return Chatty()


@_factory
def blocks_in_forward() -> nn.Module:
    return _BlocksOnARealPass()


@_factory
def blocks_when_built() -> nn.Module:
    return _BlocksWhenBuilt()
