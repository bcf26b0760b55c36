"""Models whose code changes torch's global state behind the run's back, as user code does: a factory that
calls `torch.set_num_threads(1)`, a forward that does it halfway through a run, a factory that turns oneDNN
off. What they change must be said on the result and put back before the next model."""

from __future__ import annotations

import torch

from tests.tinymodels import TinyCNN


def other_thread_count() -> int:
    """A count unlike the current one: 1, or 2 where torch already runs on one thread."""
    return 1 if torch.get_num_threads() != 1 else 2


class RecordsThreads(TinyCNN):
    """Records torch's intra-op thread count at every real forward pass."""

    seen: list[int] = []

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not x.is_meta:
            type(self).seen.append(torch.get_num_threads())
        return super().forward(x)


class FactorySetsThreads(RecordsThreads):
    seen: list[int] = []
    set_to: int | None = None


def factory_sets_threads() -> torch.nn.Module:
    """The tester's case: a factory that sets the process's thread count (to 1) while building its model."""
    FactorySetsThreads.set_to = other_thread_count()
    torch.set_num_threads(FactorySetsThreads.set_to)
    return FactorySetsThreads()


class ForwardSetsThreads(RecordsThreads):
    """Sets another thread count at its third real forward pass: the run's later samples ran under it."""

    seen: list[int] = []
    set_to: int | None = None

    def __init__(self) -> None:
        super().__init__()
        self.passes = 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not x.is_meta:
            self.passes += 1
            if self.passes == 3:
                type(self).set_to = other_thread_count()
                torch.set_num_threads(type(self).set_to)
        return super().forward(x)


def forward_sets_threads() -> torch.nn.Module:
    return ForwardSetsThreads()


def factory_disables_mkldnn() -> torch.nn.Module:
    """A factory that turns oneDNN off for the whole process."""
    torch.backends.mkldnn.enabled = False
    return TinyCNN()
