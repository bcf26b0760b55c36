"""Fake "measure a batch" functions for the batch search (engine/measurements/batch_search.py): each is a `try_batch(batch,
warmup, iters)` that returns per-batch latencies in ms, or raises out of memory above a limit, with no torch.

    search_max_batch(oom_above(12))                      # batches above 12 do not fit
    search_max_batch(rate_curve(PEAK_AT_8))              # samples/s peaks at batch 8
    search_max_batch(slow_passes(clock), clock=clock)    # every try moves a fake clock on
"""

from __future__ import annotations


class OutOfMemory(RuntimeError):
    """What a failed CUDA allocation looks like to the search without torch: torch.OutOfMemoryError is a
    RuntimeError whose text says "out of memory"."""

    def __init__(self, batch: int) -> None:
        super().__init__(f"CUDA out of memory at batch {batch}")


class FakeClock:
    """A monotonic clock that only moves when a fake try says it took time."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def rate_curve(rates: dict[int, float], *, limit: int = 10**9, calls: list[int] | None = None,
               clock: FakeClock | None = None):
    """A try_batch whose samples/s at a batch is `rates` at the largest listed batch not above it; each
    try moves `clock` on by its passes (first + warm-up + iterations) x its latency."""
    def try_batch(batch: int, warmup: int, iters: int):
        if calls is not None:
            calls.append(batch)
        if batch > limit:
            raise OutOfMemory(batch)
        rate = rates[max(b for b in rates if b <= batch)]
        ms = batch / rate * 1000.0
        if clock is not None:
            clock.now += (1 + warmup + iters) * ms / 1000.0
        return [ms] * iters
    return try_batch


def slow_passes(clock: FakeClock, calls: list[int] | None = None, limit: int = 10**9,
                pass_s=lambda batch: 0.5 + 0.1 * batch):
    """A try_batch whose pass at `batch` takes `pass_s(batch)` seconds of `clock` (samples/s rises with
    batch: the plateau rule never fires), raising out-of-memory above `limit` at once."""
    def try_batch(batch: int, warmup: int, iters: int):
        if calls is not None:
            calls.append(batch)
        if batch > limit:
            raise OutOfMemory(batch)
        clock.now += (1 + warmup + iters) * pass_s(batch)
        return [pass_s(batch) * 1000.0] * iters
    return try_batch


# samples/s peaks at batch 8 and falls ever after, as squeezenet1_1's did on the 2-core CPU box.
PEAK_AT_8 = {1: 100, 2: 180, 4: 300, 8: 400, 16: 350, 32: 300, 64: 250, 128: 200, 256: 150, 512: 100}


def oom_above(limit: int, calls: list[int] | None = None):
    def try_batch(batch: int, warmup: int, iters: int):
        if calls is not None:
            calls.append(batch)
        if batch > limit:
            raise OutOfMemory(batch)
        return [1.0 + batch / 100] * iters
    return try_batch
