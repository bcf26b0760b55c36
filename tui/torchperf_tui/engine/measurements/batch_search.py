"""The batch search of a throughput run: the batch that gives the most samples/s, and the largest batch that
fits, found by growing the batch geometrically and, when it stops at a failure, bisecting.

The search grows the batch 1, 2, 4, ... and stops growing at the first of these rules (`StopRule`):

- plateau: samples/s fell below the best seen for two doublings in a row. More batch only costs time (on
  a CPU a pass grows linearly with batch while samples/s has long peaked), so the search stops there and
  does not bisect: the largest batch that fits is then not known beyond the last batch tried, and the
  result says so. `to_oom=True` turns this rule off (the old behaviour: grow until a failure).
- oom / memory-cap: a try ran out of memory (or, on the CPU, went over the memory cap): the search bisects
  between the last batch that fitted and the first that failed.
- max-batch: the bound was reached; larger batches may fit.
- time-budget: the next try (and the measurement that may follow it), estimated from the last try's time
  scaled by batch, would not end within what is left of the budget; the try is not started.

A try that runs out of memory (or goes over the CPU memory cap, see engine/measurements/batch_runner.py) is not an
error: its exception is reduced to one line and dropped (its traceback holds the frames that hold the
half-built activations), memory is released, and the search goes on.

This module is the search alone, over a `try_batch(batch, warmup, iters)` callable: it needs no torch, and
its tests drive it with a fake one. engine/measurements/throughput.py (`find_max_batch`) builds the model and runs it.
"""

from __future__ import annotations

import enum
import math
import sys
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from torchperf_tui.core.errors import TorchperfError, first_line
from torchperf_tui.engine.hardware.host_noise import HostNoise
from torchperf_tui.engine.hardware.nvml import to_jsonable
from torchperf_tui.core.formatting import format_number

DEFAULT_MAX_BATCH = 1024
PLATEAU_DOUBLINGS = 2  # doublings in a row below the best samples/s that stop the growth
# A try only has to tell "fits" from "does not" and give a rough rate to compare: keep it short.
TRY_WARMUP = 1
TRY_ITERS = 3

OnProgress = Callable[["BatchTry"], None]
ShouldCancel = Callable[[], bool]
Clock = Callable[[], float]


class StopRule(str, enum.Enum):
    """What stopped the search (a str, so it reads as its value in JSON)."""

    PLATEAU = "plateau"
    OOM = "oom"
    MEMORY_CAP = "memory-cap"
    MAX_BATCH = "max-batch"
    TIME_BUDGET = "time-budget"
    CANCELLED = "cancelled"

    def __str__(self) -> str:
        return self.value


class MemoryCapExceeded(Exception):
    """A CPU try whose estimated or measured need is over the memory cap: treated like an out-of-memory."""


@dataclass
class TryOutcome:
    """What one try measured: per-batch latencies (ms) and the peak memory it added (bytes, if known)."""

    samples_ms: list[float]
    peak_bytes: int | None = None
    estimated_bytes: int | None = None
    host_noise: HostNoise | None = None  # the host over its timed iterations (engine/hardware/host_noise.py)


@dataclass
class BatchTry:
    """One batch size tried. `phase`: "grow" (1, 2, 4, ...), "bisect", or "measure" (the final run)."""

    batch: int
    fits: bool
    phase: str
    latency_ms: float | None = None  # median per-batch latency of the try's iterations
    # A try (3 iterations): batch / median latency, so one slow iteration does not steer the search.
    # The measurement: iterations x batch / total time of those iterations, what a sustained run delivers.
    samples_per_s: float | None = None
    reason: str = ""  # why it did not fit (one line); "" when it did
    peak_bytes: int | None = None  # memory the try added at its peak (CUDA allocator / CPU RSS)
    estimated_bytes: int | None = None  # the CPU estimate checked against the cap before running
    iters: int = 0
    seconds: float | None = None  # wall time of the whole try: input, first iteration, warm-up, iterations
    failed_on: str = ""  # StopRule.OOM or StopRule.MEMORY_CAP when it did not fit
    host_noise: HostNoise | None = None  # the host over its timed iterations, as a timed run's
    samples_ms: list[float] = field(default_factory=list, repr=False)  # its timed iterations (not in its JSON)

    @property
    def label(self) -> str:
        """'batch 4 (grow)', 'the measurement at batch 4': the point, as its marks name it."""
        return f"the measurement at batch {self.batch}" if self.phase == "measure" else \
            f"batch {self.batch} ({self.phase})"

    def disturbance_marks(self) -> list[str]:
        return self.host_noise.warnings() if self.host_noise is not None else []

    def to_dict(self) -> dict[str, Any]:
        data = to_jsonable({k: v for k, v in self.__dict__.items() if k not in ("host_noise", "samples_ms")})
        data["host_noise"] = self.host_noise.to_dict() if self.host_noise is not None else None
        data["disturbance_marks"] = self.disturbance_marks()
        return data


@dataclass
class SearchOutcome:
    max_batch: int  # largest batch that fitted (0 when none did)
    tries: list[BatchTry]
    cancelled: bool
    hit_bound: bool  # growth stopped at the max-batch bound, not at a failure: the real limit may be higher
    stop_rule: StopRule
    stop_reason: str  # one sentence: what stopped the search, with its numbers
    limit_found: bool  # the search saw where batches stop fitting (a failure, bisected to resolution)
    first_failure: int | None  # the smallest batch that did not fit, if any

    @property
    def best(self) -> BatchTry | None:
        """The fitting try with the most samples/s (the smaller batch on a tie)."""
        return best_of(self.tries)


def best_of(tries: list[BatchTry]) -> BatchTry | None:
    fitting = [t for t in tries if t.fits and t.samples_per_s is not None]
    return max(fitting, key=lambda t: (t.samples_per_s, -t.batch)) if fitting else None



# --------------------------------------------------------------------------------------------------------
# Out-of-memory recognition


_OOM_TEXT = ("out of memory", "alloc_failed", "can't allocate memory", "cannot allocate memory")


def is_out_of_memory(exc: BaseException) -> bool:
    """torch.OutOfMemoryError, the CPU cap, and the allocation failures that surface as RuntimeError
    (cuBLAS/cuDNN workspace allocation, the CPU allocator's "can't allocate memory")."""
    if isinstance(exc, (MemoryCapExceeded, MemoryError)):
        return True
    # torch's own error, when torch is loaded (an exception torch raised means it is): never imported here.
    torch_oom = getattr(sys.modules.get("torch"), "OutOfMemoryError", None)
    if torch_oom is not None and isinstance(exc, torch_oom):
        return True
    return isinstance(exc, RuntimeError) and any(t in str(exc).lower() for t in _OOM_TEXT)


def _rate(samples_ms: list[float], batch: int, *, by_median: bool = False) -> tuple[float | None, float | None]:
    """(median latency ms, samples/s): iterations x batch / total time, or batch / median latency."""
    if not samples_ms:
        return None, None
    ordered = sorted(samples_ms)
    mid = len(ordered) // 2
    median = ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2
    if by_median:
        return median, (batch * 1000.0 / median if median > 0 else None)
    total_s = sum(samples_ms) / 1000.0
    return median, (len(samples_ms) * batch / total_s if total_s > 0 else None)


def per_s(rate: float | None) -> str:
    return f"{format_number(rate, digits=1)}/s" if rate is not None else "n/a"


# --------------------------------------------------------------------------------------------------------
# The search


TryBatch = Callable[..., "TryOutcome | float | list[float]"]


def _outcome(value: TryOutcome | float | list[float]) -> TryOutcome:
    if isinstance(value, TryOutcome):
        return value
    if isinstance(value, (int, float)):
        return TryOutcome([float(value)])
    return TryOutcome([float(v) for v in value])


def run_try(try_batch: TryBatch, batch: int, phase: str, *, warmup: int, iters: int,
            clock: Clock = time.monotonic) -> BatchTry | None:
    """One try: a BatchTry that fits or says why not (out of memory, over the cap); None when it was
    cancelled before one iteration ran (it says nothing about fitting). Other errors propagate."""
    reason, failed_on = "", ""
    estimated = peak = None
    outcome: TryOutcome | None = None
    started = clock()
    try:
        outcome = _outcome(try_batch(batch, warmup=warmup, iters=iters))
    except Exception as exc:  # noqa: BLE001 - only out-of-memory is swallowed, anything else re-raised
        if not is_out_of_memory(exc):
            raise
        reason = first_line(exc)
        failed_on = StopRule.MEMORY_CAP.value if isinstance(exc, MemoryCapExceeded) else StopRule.OOM.value
        estimated = getattr(exc, "estimated_bytes", None)
        peak = getattr(exc, "peak_bytes", None)  # a CPU try that ran and went over the cap
        # `exc` (and its traceback, which pins the failed try's tensors) dies with this block.
    seconds = clock() - started
    if outcome is None:
        return BatchTry(batch, False, phase, reason=reason or "out of memory", peak_bytes=peak,
                        estimated_bytes=estimated, seconds=seconds, failed_on=failed_on)
    if not outcome.samples_ms:
        return None
    latency, rate = _rate(outcome.samples_ms, batch, by_median=phase != "measure")
    return BatchTry(batch, True, phase, latency, rate, peak_bytes=outcome.peak_bytes,
                    estimated_bytes=outcome.estimated_bytes, iters=len(outcome.samples_ms), seconds=seconds,
                    host_noise=outcome.host_noise, samples_ms=list(outcome.samples_ms))


def search_max_batch(try_batch: TryBatch, *, max_batch: int = DEFAULT_MAX_BATCH, resolution: int = 1,
                     warmup: int = TRY_WARMUP, iters: int = TRY_ITERS,
                     to_oom: bool = False, plateau_doublings: int = PLATEAU_DOUBLINGS,
                     time_budget_s: float | None = None, budget_started: float | None = None,
                     reserve_factor: float = 0.0, clock: Clock = time.monotonic,
                     release: Callable[[], object] | None = None, on_progress: OnProgress | None = None,
                     should_cancel: ShouldCancel | None = None) -> SearchOutcome:
    """Grow the batch from 1 by doubling until a `StopRule` stops it; bisect after a failure.

    `try_batch(batch, warmup=, iters=)` returns per-batch latencies in ms (a float, a list, or a TryOutcome)
    and raises torch.OutOfMemoryError (or MemoryCapExceeded) when the batch does not fit; any other error
    propagates. `release()` runs after every try that failed and once at the end, so the caller gets the
    allocator back at its baseline (not after fitting tries: their tensors are freed by reference counting,
    and a full gc costs tenths of a second with torch loaded). Bisection stops when the gap between the
    last fit and the first failure is at most `resolution`.

    Growth stops when samples/s has been below the best seen for `plateau_doublings` doublings in a row
    (unless `to_oom`), at a failure, at `max_batch`, or when the next try would not end within
    `time_budget_s` (counted from `budget_started` on `clock`, default now; None: no budget). A try's time
    is estimated as the last fitting try's wall time scaled by batch, times `1 + reserve_factor`: the
    caller's measurement after the search, at a batch no larger, must fit in the budget too. The first try
    always runs.
    """
    if max_batch < 1:
        raise TorchperfError(f"the max batch must be at least 1, got {max_batch}")
    if resolution < 1:
        raise TorchperfError(f"resolution must be at least 1, got {resolution}")
    if plateau_doublings < 1:
        raise TorchperfError(f"plateau doublings must be at least 1, got {plateau_doublings}")
    if time_budget_s is not None and not (math.isfinite(time_budget_s) and time_budget_s > 0):
        raise TorchperfError(f"the time budget must be a finite number of seconds > 0, got {time_budget_s}")
    if not (math.isfinite(reserve_factor) and reserve_factor >= 0):
        raise TorchperfError(f"the reserve factor must be >= 0, got {reserve_factor}")
    release = release or (lambda: None)
    emit = on_progress or (lambda t: None)
    search = _Search(tries=[], clock=clock, started=clock() if budget_started is None else budget_started,
                     budget=time_budget_s, reserve=reserve_factor)

    def attempt(batch: int, phase: str) -> bool | None:
        """True: fits; False: out of memory; None: cancelled before one iteration ran."""
        t = run_try(try_batch, batch, phase, warmup=warmup, iters=iters, clock=clock)
        if t is None:
            return None
        if not t.fits:
            release()
        search.tries.append(t)
        emit(t)
        return t.fits

    try:
        return search.run(attempt, max_batch, resolution, should_cancel or (lambda: False),
                          None if to_oom else plateau_doublings)
    finally:
        release()


@dataclass
class _Search:
    """The state of one search and its stop rules (`search_max_batch` is the way in)."""

    tries: list[BatchTry]
    clock: Clock
    started: float
    budget: float | None
    reserve: float

    def _left_s(self) -> float:
        return (self.budget or 0.0) - (self.clock() - self.started)

    def _over_budget(self, batch: int) -> str | None:
        """Why a try at `batch` is not started, or None to go ahead."""
        if self.budget is None:
            return None
        ran = [t for t in self.tries if t.fits and t.seconds is not None]
        if not ran:
            return None  # nothing to estimate from: the first try always runs
        last = ran[-1]
        estimate = last.seconds * batch / last.batch * (1 + self.reserve)
        left = self._left_s()
        if left <= 0:
            return f"the {self.budget:g} s time budget was spent"
        if estimate <= left:
            return None
        return (f"batch {batch} would take about {estimate:.0f} s with the measurement after it, "
                f"more than the {left:.0f} s left of the {self.budget:g} s time budget")

    def _outcome(self, max_batch: int, rule: StopRule, reason: str, *, limit_found: bool = False,
                 first_failure: int | None = None) -> SearchOutcome:
        return SearchOutcome(max_batch, self.tries, rule is StopRule.CANCELLED, rule is StopRule.MAX_BATCH,
                             rule, reason, limit_found, first_failure)

    def run(self, attempt: Callable[[int, str], bool | None], max_batch: int, resolution: int,
            cancelled: ShouldCancel, plateau_doublings: int | None) -> SearchOutcome:
        last_fit, batch = 0, 1
        while True:  # growth: 1, 2, 4, ... up to max_batch
            if cancelled():
                return self._outcome(last_fit, StopRule.CANCELLED, f"cancelled while growing, before batch {batch}")
            over = self._over_budget(batch)
            if over is not None:
                return self._outcome(last_fit, StopRule.TIME_BUDGET, f"stopped growing at batch {last_fit}: {over}")
            fits = attempt(batch, "grow")
            if fits is None:
                return self._outcome(last_fit, StopRule.CANCELLED, f"cancelled while growing, during batch {batch}")
            if not fits:
                break
            last_fit = batch
            best = best_of(self.tries)
            grown = [t for t in self.tries if t.phase == "grow" and t.fits]
            below = len(grown) - 1 - grown.index(best) if best in grown else 0
            if plateau_doublings is not None and below >= plateau_doublings:
                return self._outcome(
                    last_fit, StopRule.PLATEAU,
                    f"stopped growing at batch {batch}: samples/s fell below the best (batch {best.batch}, "
                    f"{per_s(best.samples_per_s)}) for {_count(below, 'doubling')}")
            if batch >= max_batch:
                return self._outcome(last_fit, StopRule.MAX_BATCH,
                                     f"stopped growing at the max-batch bound {max_batch}: larger batches may fit")
            batch = min(batch * 2, max_batch)
        failure = self.tries[-1]
        rule = StopRule(failure.failed_on or StopRule.OOM.value)
        what = "over the CPU memory cap" if rule is StopRule.MEMORY_CAP else "out of memory"
        grew_to = f"stopped growing at batch {batch}: {what}"
        low, high = last_fit, batch
        if low == 0:
            return self._outcome(0, rule, f"{grew_to}: even batch 1 does not fit", limit_found=True,
                                 first_failure=1)
        while high - low > resolution:  # bisection between the last fit and the first failure
            between = f"between {low} (fits) and {high} (does not)"
            if cancelled():
                return self._outcome(low, StopRule.CANCELLED, f"cancelled while bisecting {between}",
                                     first_failure=high)
            mid = (low + high) // 2
            over = self._over_budget(mid)
            if over is not None:
                return self._outcome(low, StopRule.TIME_BUDGET, f"{grew_to}; bisection stopped {between}: {over}",
                                     first_failure=high)
            fits = attempt(mid, "bisect")
            if fits is None:
                return self._outcome(low, StopRule.CANCELLED,
                                     f"cancelled while bisecting {between}, during batch {mid}", first_failure=high)
            if fits:
                low = mid
            else:
                high = mid
        return self._outcome(low, rule, f"{grew_to}; bisection: {low} fits, {high} does not",
                             limit_found=True, first_failure=high)


def _count(n: int, noun: str) -> str:
    words = {1: "one", 2: "two", 3: "three", 4: "four"}
    return f"{words.get(n, n)} {noun}{'' if n == 1 else 's'}"
