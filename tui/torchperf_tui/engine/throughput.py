"""Throughput: the batch that gives the most samples/s, and the largest batch that fits, found by growing the
batch geometrically and, when it stops at a failure, bisecting.

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

Then the batch with the best samples/s among the tries (a try's rate is batch / its median latency: it
has three iterations, one slow one must not steer the search) is measured again with more iterations: that
measurement, iterations x batch / total time, is the result's samples/s. A try that runs out of memory
is not an error: its exception is reduced to one line and dropped (its traceback holds the frames that hold
the half-built activations), memory is released, and the search goes on. If not even batch 1 fits,
`find_max_batch` raises OutOfMemory: a result always has a measured samples/s, unless it was cancelled.

On the CPU nothing raises before the box swaps, so a memory cap (default: half of the RAM available when
the search starts) stands in for the device's capacity: a try's need is estimated before it runs, from
the peak RSS growth of the largest batch that fitted so far scaled by batch (or, before anything has run,
from the activation bytes of the complexity analysis), and a try whose estimate is over the cap counts as
out of memory without being run; a try whose measured peak went over the cap counts as not fitting too.

With `cfg.step == "train"` every try is a training step (engine/train_step.py): forward, loss, backward and
the optimizer step, under autocast with `cfg.amp`. The largest batch that fits is then the largest that fits
*for training*: activations are kept for the backward, and gradients and optimizer state are resident too.
The weights train as the search goes (nothing there depends on their values).

`search_max_batch` is the pure search over a `try_batch(batch, warmup, iters)` callable (the seam tests
drive with the real `torch.OutOfMemoryError`); `find_max_batch` builds the model and runs it.
"""

from __future__ import annotations

import enum
import math
import time
from dataclasses import dataclass, field
from typing import Any, Callable

import psutil
from torchperf_tui.engine.lazy_torch import torch

from torchperf_tui.engine.errors import OutOfMemory, TorchperfError, first_line
from torchperf_tui.engine.flags import applied_flags
from torchperf_tui.engine.inputs import dtype_name, make_input, parse_dtype, resolve_device
from torchperf_tui.engine.nvml import NA, to_jsonable
from torchperf_tui.engine.telemetry import release_memory
from torchperf_tui.engine.condition_sampler import ConditionSampler, conditions_sampler
from torchperf_tui.engine.run_conditions import RunConditions
from torchperf_tui.engine.timing import BenchConfig, run_timed_loop
from torchperf_tui.engine.workload import forward_errors, place_model
from torchperf_tui.formatting import format_bytes, format_number

DEFAULT_MAX_BATCH = 1024
DEFAULT_MEMORY_FRACTION = 0.5  # of the RAM available when a CPU search starts
DEFAULT_TIME_BUDGET_S = 120.0  # search and final measurement together, on any device
PLATEAU_DOUBLINGS = 2  # doublings in a row below the best samples/s that stop the growth
SPEED_CHANGE = 2.0  # a measurement this many times off its own try's rate says the machine's speed changed
# A try only has to tell "fits" from "does not" and give a rough rate to compare: keep it short.
TRY_WARMUP = 1
TRY_ITERS = 3
MEASURE_WARMUP = 3
MEASURE_ITERS = 10

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

    def to_dict(self) -> dict[str, Any]:
        return to_jsonable(self)


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
        return _best_of(self.tries)


def _best_of(tries: list[BatchTry]) -> BatchTry | None:
    fitting = [t for t in tries if t.fits and t.samples_per_s is not None]
    return max(fitting, key=lambda t: (t.samples_per_s, -t.batch)) if fitting else None


@dataclass
class ThroughputResult:
    model: str
    device: str
    sample_shape: tuple[int, ...]  # one input item, without the batch dimension
    dtype: str
    channels_last: bool
    max_batch: int  # largest batch that fitted among those tried (see limit_found)
    max_batch_bound: int
    hit_bound: bool
    tries: list[BatchTry]
    measurement: BatchTry | None  # the longer run at best_batch
    samples_per_s: float | None  # from `measurement`: iterations x batch / total time, at best_batch
    latency_ms: float | None  # median per-batch latency at best_batch
    memory_cap_bytes: int | NA  # the CPU cap; NA on CUDA (the device's own memory is the limit)
    allocator_before_bytes: int | NA  # torch.cuda.memory_allocated before the search
    allocator_after_bytes: int | NA  # ... and after it, once everything was released
    cancelled: bool
    duration_s: float  # building the model, the search and the measurement
    best_batch: int  # the batch whose try gave the most samples/s: where `measurement` ran (0: none)
    best_try_samples_per_s: float | None  # that try's own rate (batch / its median latency)
    stop_rule: StopRule
    stop_reason: str  # one sentence: what stopped the search, with its numbers
    limit_found: bool  # False: larger batches than max_batch were not all tried and may fit
    first_failure: int | None  # the smallest batch that did not fit
    time_budget_s: float | None
    to_oom: bool  # the plateau rule was off: growth went on to a failure or the bound
    notes: list[str] = field(default_factory=list)
    step: str = "infer"  # what each iteration was: "infer", or "train (sgd)"; " · amp bf16" under autocast
    conditions: RunConditions | None = None  # CUDA: the GPU over the final measurement at best_batch

    @property
    def points(self) -> list[BatchTry]:
        """The tries that fitted, by batch size: throughput and latency against batch, for a plot."""
        best: dict[int, BatchTry] = {}
        for t in self.tries:
            if t.fits:
                best[t.batch] = t
        return [best[b] for b in sorted(best)]

    def limit_text(self) -> str:
        """The largest batch that fits, as far as the search knows it: '12 (13 does not fit)', or
        'not searched past 64: stopped by plateau', never a limit the search did not find."""
        if self.max_batch == 0:
            return "none fitted before the search stopped" if self.cancelled else "none"
        if self.limit_found and self.first_failure is not None:
            within = "" if self.first_failure == self.max_batch + 1 else \
                f"; bisected to within {self.first_failure - self.max_batch}"
            return f"{self.max_batch} ({self.first_failure} does not fit{within})"
        if self.first_failure is not None:
            return (f"between {self.max_batch} (fits) and {self.first_failure} (does not): "
                    f"stopped by {self.stop_rule}")
        return f"not searched past {self.max_batch}: stopped by {self.stop_rule}"

    def time_text(self) -> str:
        """Time spent, against the budget if there was one."""
        if self.time_budget_s is None:
            return f"{self.duration_s:.1f} s (no time budget)"
        return f"{self.duration_s:.1f} s of the {self.time_budget_s:g} s budget"

    def headline(self) -> str:
        """One plain line: the best rate and its batch, the largest batch that fits, the time spent."""
        rate = (f"best {format_number(self.samples_per_s, digits=1)} samples/s at batch {self.best_batch}"
                if self.samples_per_s is not None else "no measurement")
        return f"{rate} · largest batch that fits: {self.limit_text()} · {self.time_text()}"

    def to_dict(self) -> dict[str, Any]:
        data = to_jsonable(self)
        data["stop_rule"] = self.stop_rule.value
        data["points"] = [p.to_dict() for p in self.points]
        data["conditions"] = self.conditions.to_dict() if self.conditions is not None else None
        return data


# --------------------------------------------------------------------------------------------------------
# Out-of-memory recognition


_OOM_TEXT = ("out of memory", "alloc_failed", "can't allocate memory", "cannot allocate memory")


def is_out_of_memory(exc: BaseException) -> bool:
    """torch.OutOfMemoryError, the CPU cap, and the allocation failures that surface as RuntimeError
    (cuBLAS/cuDNN workspace allocation, the CPU allocator's "can't allocate memory")."""
    if isinstance(exc, (torch.OutOfMemoryError, MemoryCapExceeded, MemoryError)):
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


def _per_s(rate: float | None) -> str:
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
                    estimated_bytes=outcome.estimated_bytes, iters=len(outcome.samples_ms), seconds=seconds)


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
        cancel_text = "cancelled"
        while True:  # growth: 1, 2, 4, ... up to max_batch
            if cancelled():
                return self._outcome(last_fit, StopRule.CANCELLED, cancel_text)
            over = self._over_budget(batch)
            if over is not None:
                return self._outcome(last_fit, StopRule.TIME_BUDGET, f"stopped growing at batch {last_fit}: {over}")
            fits = attempt(batch, "grow")
            if fits is None:
                return self._outcome(last_fit, StopRule.CANCELLED, cancel_text)
            if not fits:
                break
            last_fit = batch
            best = _best_of(self.tries)
            grown = [t for t in self.tries if t.phase == "grow" and t.fits]
            below = len(grown) - 1 - grown.index(best) if best in grown else 0
            if plateau_doublings is not None and below >= plateau_doublings:
                return self._outcome(
                    last_fit, StopRule.PLATEAU,
                    f"stopped growing at batch {batch}: samples/s fell below the best (batch {best.batch}, "
                    f"{_per_s(best.samples_per_s)}) for {_count(below, 'doubling')}")
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
            if cancelled():
                return self._outcome(low, StopRule.CANCELLED, cancel_text, first_failure=high)
            mid = (low + high) // 2
            over = self._over_budget(mid)
            if over is not None:
                return self._outcome(low, StopRule.TIME_BUDGET,
                                     f"{grew_to}; bisection stopped between {low} (fits) and {high} "
                                     f"(does not): {over}", first_failure=high)
            fits = attempt(mid, "bisect")
            if fits is None:
                return self._outcome(low, StopRule.CANCELLED, cancel_text, first_failure=high)
            if fits:
                low = mid
            else:
                high = mid
        return self._outcome(low, rule, f"{grew_to}; bisection: {low} fits, {high} does not",
                             limit_found=True, first_failure=high)


def _count(n: int, noun: str) -> str:
    words = {1: "one", 2: "two", 3: "three", 4: "four"}
    return f"{words.get(n, n)} {noun}{'' if n == 1 else 's'}"


# --------------------------------------------------------------------------------------------------------
# Running a real model


class _PeakRss:
    """Peak resident memory over a span: Linux lets a process reset its high-water mark (VmHWM) by
    writing 5 to /proc/self/clear_refs; elsewhere the RSS after the span stands in (an underestimate)."""

    def __init__(self) -> None:
        self._process = psutil.Process()
        self.exact = True

    def reset(self) -> int:
        """Start a span; returns the RSS now."""
        try:
            with open("/proc/self/clear_refs", "w") as fh:
                fh.write("5")
        except OSError:
            self.exact = False
        return int(self._process.memory_info().rss)

    def peak(self) -> int:
        if self.exact:
            try:
                with open("/proc/self/status") as fh:
                    for line in fh:
                        if line.startswith("VmHWM:"):
                            return int(line.split()[1]) * 1024
            except OSError:
                pass
            self.exact = False
        return int(self._process.memory_info().rss)


class ModelBatchRunner:
    """Runs one built model at a given batch: the default `try_batch` of `find_max_batch`.

    On the CPU it keeps the estimate of a try's need (see the module docstring) and refuses, with
    MemoryCapExceeded, a try whose estimate is over `memory_cap_bytes`, or that went over it when it ran.
    """

    def __init__(self, model: torch.nn.Module, sample_shape: tuple[int, ...], *, device: torch.device,
                 dtype: torch.dtype, channels_last: bool = False, memory_cap_bytes: int | None = None,
                 activation_bytes_per_sample: int | None = None,
                 should_cancel: ShouldCancel | None = None, step=None, seed: int = 0,
                 sampler: ConditionSampler | None = None) -> None:
        """`step`: a train_step.StepSpec (None: an inference pass), run by a StepRunner kept across tries (its
        optimizer state is allocated once, at the first try, as in a training loop). `sampler` reads the GPU's
        conditions over the timed iterations of a call made while `window` names one (the final measurement)."""
        from torchperf_tui.engine.train_step import StepRunner, StepSpec

        self.sampler = sampler
        self.window: str | None = None

        self.model = model
        self.run_step = StepRunner(model, step or StepSpec(), device, seed=seed)
        self.sample_shape = tuple(sample_shape)
        self.device = device
        self.dtype = dtype
        self.channels_last = channels_last
        self.memory_cap_bytes = memory_cap_bytes
        self.activation_bytes_per_sample = activation_bytes_per_sample
        self.should_cancel = should_cancel
        self._fits: dict[int, int] = {}  # batch -> peak growth (bytes) of the tries that ran
        self._rss = _PeakRss()
        # Growth is measured from the RSS when the runner was made (just after a release), not from the
        # RSS before each try: freed pages glibc keeps from an earlier try would be reused unseen.
        self._baseline_rss = int(psutil.Process().memory_info().rss)

    def estimate_bytes(self, batch: int) -> int | None:
        """A try's expected peak memory growth.

        From the two largest tries that ran: a straight line (fixed overhead + bytes per sample) through
        their measured peaks, never below the larger peak; from one: its peak scaled by batch (its fixed
        overhead scales too, which errs on the safe side); before any: activation bytes x batch.
        """
        fits: list[tuple[int, int]] = []
        for b, grown in sorted(self._fits.items()):
            # Peaks are noisy (glibc reuses freed pages unseen): a larger batch never needs less.
            envelope = max(grown, fits[-1][1] if fits else 0)
            if envelope > 0:
                fits.append((b, envelope))
        if len(fits) >= 2:
            (b1, p1), (b2, p2) = fits[-2], fits[-1]
            per_sample = (p2 - p1) / (b2 - b1)
            if per_sample > 0:
                return int(max(p2 + per_sample * (batch - b2), p2 if batch >= b2 else 0))
        if fits:
            b2, p2 = fits[-1]
            return int(p2 * batch / b2)
        if self.activation_bytes_per_sample:
            return int(self.activation_bytes_per_sample * batch)
        return None

    def __call__(self, batch: int, warmup: int = TRY_WARMUP, iters: int = TRY_ITERS) -> TryOutcome:
        on_cpu = self.device.type == "cpu"
        cap = self.memory_cap_bytes if on_cpu else None
        estimated = self.estimate_bytes(batch) if on_cpu else None
        # A batch that already ran under the cap runs again (the final measurement): its own measured peak
        # says more than an estimate drawn through other batches.
        ran_under_cap = cap is not None and self._fits.get(batch, cap + 1) <= cap
        if cap is not None and estimated is not None and estimated > cap and not ran_under_cap:
            exc = MemoryCapExceeded(f"over the CPU memory cap: needs about {format_bytes(estimated)}, "
                                    f"cap {format_bytes(self.memory_cap_bytes)}")
            exc.estimated_bytes = estimated  # type: ignore[attr-defined]
            raise exc
        shape = (batch, *self.sample_shape)
        if on_cpu:
            # Memory freed since the baseline was taken would hide part of this try's growth.
            self._baseline_rss = min(self._baseline_rss, self._rss.reset())
        else:
            torch.cuda.synchronize(self.device)
            torch.cuda.reset_peak_memory_stats(self.device)
            allocated_before = torch.cuda.memory_allocated(self.device)
        x = make_input(shape, dtype=self.dtype, device=self.device, channels_last=self.channels_last)
        run_step = self.run_step
        sampler = self.sampler if self.window is not None else None  # read over the final measurement only
        window = self.window

        def before(phase: str, index: int) -> None:  # outside the timer
            if sampler is not None and phase == "timed":
                sampler.before_timed(window, index)

        times = run_timed_loop(lambda: run_step(x), device=self.device, warmup=warmup, iters=iters,
                               should_cancel=self.should_cancel, before_iteration=before)
        if sampler is not None:
            sampler.close(window, keep=not times.cancelled)
        x = None  # the input goes before the peak is read and before the next, larger try
        if on_cpu:
            peak = max(0, self._rss.peak() - self._baseline_rss)
            self._fits[batch] = peak  # measured: the next estimates draw on it, over the cap or not
            if cap is not None and peak > cap:
                # It ran, but a batch that needs more than the cap does not fit under it.
                exc = MemoryCapExceeded(f"went over the CPU memory cap: used about {format_bytes(peak)}, "
                                        f"cap {format_bytes(cap)}")
                exc.estimated_bytes = estimated  # type: ignore[attr-defined]
                exc.peak_bytes = peak  # type: ignore[attr-defined]
                raise exc
        else:
            peak = max(0, torch.cuda.max_memory_allocated(self.device) - allocated_before)
        samples = times.samples_ms or ([times.first_iter_ms] if times.first_iter_ms is not None else [])
        return TryOutcome(samples, peak_bytes=peak, estimated_bytes=estimated)


def _activation_bytes_per_sample(cfg: BenchConfig, shape: tuple[int, ...]) -> int | None:
    """Sum of every layer's output bytes for one sample: an upper bound on live activations under
    inference mode (outputs are freed as soon as the next layer has read them), and about what a training
    step keeps for its backward (its gradients come on top, which the first try's measured growth
    catches). None if analysis fails."""
    from torchperf_tui.engine.complexity import analyse_complexity

    try:
        c = analyse_complexity(cfg.model, (1, *shape[1:]), dtype=cfg.dtype, layers=True)
    except Exception:  # noqa: BLE001 - the estimate is a nicety; the measured growth takes over after one try
        return None
    total = sum(layer.output_bytes for layer in c.layers)
    return total or None


def _drop_cublas_workspaces() -> bool:
    """The first matmul gives each stream a cuBLAS workspace from the caching allocator, kept for the life of
    the process; hand them back so the allocator really ends where it started (a private torch function:
    looked up, not assumed)."""
    clear = getattr(torch._C, "_cuda_clearCublasWorkspaces", None)
    if clear is None:
        return False
    clear()
    return True


def find_max_batch(cfg: BenchConfig, *, max_batch: int = DEFAULT_MAX_BATCH, resolution: int = 1,
                   to_oom: bool = False, time_budget_s: float | None = DEFAULT_TIME_BUDGET_S,
                   plateau_doublings: int = PLATEAU_DOUBLINGS,
                   try_warmup: int = TRY_WARMUP, try_iters: int = TRY_ITERS,
                   measure_warmup: int = MEASURE_WARMUP, measure_iters: int = MEASURE_ITERS,
                   memory_cap_bytes: int | None = None, memory_fraction: float = DEFAULT_MEMORY_FRACTION,
                   on_progress: OnProgress | None = None, should_cancel: ShouldCancel | None = None,
                   try_batch: TryBatch | None = None, clock: Clock = time.monotonic) -> ThroughputResult:
    """The batch of `cfg.model` that gives the most samples/s on `cfg.device`, measured again there with
    more iterations, and the largest batch that fits, as far as the search went (see the module docstring).

    `cfg.input_shape`/`cfg.batch` only give the per-sample shape (the batch dimension is searched).
    `to_oom` turns the plateau rule off: growth goes on to a failure or `max_batch`, then bisects.
    `time_budget_s` (None: none) counts from the call, model building and the final measurement included.
    `memory_cap_bytes` (CPU only) defaults to `memory_fraction` of the RAM available now. `try_batch`
    replaces the model runner and `clock` the monotonic clock (seams for tests); by default the model is
    built here and dropped at the end. Raises OutOfMemory when no batch fits, or when even the batches that
    fitted in the search do not in the final measurement: a result that is not cancelled has a samples/s.
    """
    from torchperf_tui.engine.train_step import amp_problem, grad_context

    started = clock()
    device = resolve_device(cfg.device)
    dtype = parse_dtype(cfg.dtype)
    step = cfg.step_spec()
    problem = amp_problem(step.amp, device, dtype)
    if problem:
        raise TorchperfError(problem)
    sample_shape = tuple(cfg.resolved_shape()[1:])
    on_cuda = device.type == "cuda"
    notes: list[str] = []
    cap: int | NA
    if on_cuda:
        cap = NA("on CUDA the device's own memory is the limit")
        torch.cuda.synchronize(device)
        _drop_cublas_workspaces()  # the same footing as the end, where they are dropped too
        allocated_before: int | NA = int(torch.cuda.memory_allocated(device))
    else:
        if memory_cap_bytes is None:
            memory_cap_bytes = int(psutil.virtual_memory().available * memory_fraction)
            notes.append(f"CPU memory cap {format_bytes(memory_cap_bytes)} = {memory_fraction:g} x RAM available "
                         "at the start; a try estimated or measured over it counts as out of memory")
        cap = memory_cap_bytes
        allocated_before = NA("no CUDA allocator on the CPU")

    def release() -> None:
        release_memory("cuda" if on_cuda else "cpu")

    def is_cancelled() -> bool:
        return bool(should_cancel and should_cancel())

    model = None
    sampler: ConditionSampler | None = None
    runner: TryBatch
    if try_batch is not None:
        runner = try_batch
    else:
        from torchperf_tui.engine.models import build_model

        try:
            model = place_model(build_model(cfg.model, device="cpu"), device, dtype, cfg.channels_last,
                                1 + len(sample_shape))
        except torch.OutOfMemoryError as exc:
            release()
            raise OutOfMemory(f"{cfg.model}'s weights alone do not fit on {device}: {first_line(exc)}") from None
        per_sample = None if on_cuda else _activation_bytes_per_sample(cfg, (1, *sample_shape))
        if not on_cuda:
            release()  # trim first: the runner's RSS baseline must not hold reusable free pages
        sampler = conditions_sampler(device)  # None on the CPU: the GPU over the final measurement
        runner = ModelBatchRunner(model, sample_shape, device=device, dtype=dtype,
                                  channels_last=cfg.channels_last,
                                  memory_cap_bytes=None if on_cuda else memory_cap_bytes,
                                  activation_bytes_per_sample=per_sample, should_cancel=should_cancel,
                                  step=step, seed=cfg.seed, sampler=sampler)
    # The measurement after the search runs the best batch 1 + warm-up + iterations times, a try 1 + ...:
    # a try is only started if the measurement that may follow it fits in the budget too.
    reserve = (1 + measure_warmup + measure_iters) / (1 + try_warmup + try_iters)
    measurements: list[BatchTry] = []
    try:
        with applied_flags(cfg.flags), grad_context(step):
            with forward_errors(cfg.model, (1, *sample_shape), dtype, device):
                outcome = search_max_batch(runner, max_batch=max_batch, resolution=resolution,
                                           warmup=try_warmup, iters=try_iters, to_oom=to_oom,
                                           plateau_doublings=plateau_doublings, time_budget_s=time_budget_s,
                                           budget_started=started, reserve_factor=reserve, clock=clock,
                                           release=release, on_progress=on_progress, should_cancel=should_cancel)
            if not outcome.cancelled and not is_cancelled():
                measurements = _measure_best(runner, outcome.tries, measure_warmup, measure_iters, release,
                                             on_progress, clock, is_cancelled)
    finally:
        del runner, model
        release()
        if on_cuda and _drop_cublas_workspaces():
            release()
    cancelled = outcome.cancelled or is_cancelled()
    if outcome.max_batch == 0 and not cancelled:
        failure = next((t for t in outcome.tries if not t.fits), None)
        raise OutOfMemory(f"{cfg.model}: even batch {outcome.tries[0].batch if outcome.tries else 1} does not "
                          f"fit on {device}: {failure.reason if failure else 'out of memory'}")
    measurement = measurements[-1] if measurements else None
    max_fit, first_failure, limit_found = outcome.max_batch, outcome.first_failure, outcome.limit_found
    for failed in (m for m in measurements if not m.fits):
        notes.append(f"batch {failed.batch} fitted in the search but not in the longer measurement "
                     f"({failed.reason}): counted as not fitting")
        first_failure = min(first_failure or failed.batch, failed.batch)
        if max_fit >= failed.batch:
            max_fit = max((t.batch for t in outcome.tries if t.fits and t.batch < failed.batch), default=0)
            limit_found = limit_found and first_failure - max_fit <= resolution
    if not cancelled and (measurement is None or not measurement.fits or measurement.samples_per_s is None):
        raise OutOfMemory(f"{cfg.model}: no batch that fitted in the search could be measured on {device}: "
                          + "; ".join(f"batch {m.batch}: {m.reason}" for m in measurements if not m.fits))
    allocated_after: int | NA = allocated_before
    if on_cuda:
        torch.cuda.synchronize(device)
        allocated_after = int(torch.cuda.memory_allocated(device))
        if allocated_after != allocated_before:
            notes.append(f"the CUDA allocator holds {format_bytes(allocated_after - allocated_before)} more than "
                         "before the search (library workspaces created by the first run stay allocated)")
    fitted = measurement if measurement is not None and measurement.fits else None
    conditions = (sampler.summary(measure_window(fitted.batch), items=fitted.iters * fitted.batch)
                  if sampler is not None and fitted is not None and fitted.iters else None)
    best_try = _best_of([t for t in outcome.tries if fitted is not None and t.batch == fitted.batch])
    if best_try is not None and fitted.samples_per_s and best_try.samples_per_s:
        ratio = fitted.samples_per_s / best_try.samples_per_s
        if not 1 / SPEED_CHANGE <= ratio <= SPEED_CHANGE:
            # Seen with another process on a 2-core box: the tries compared batches at another speed.
            notes.append(f"the measurement at batch {fitted.batch} gave {_per_s(fitted.samples_per_s)}, {ratio:.2g}x "
                         f"its try's {_per_s(best_try.samples_per_s)}: the machine's speed changed during the "
                         "search (another process on it?), so the batch picked may not be the best; rerun on a "
                         "quiet machine")
    return ThroughputResult(
        model=cfg.model, device=str(device), sample_shape=sample_shape, dtype=dtype_name(dtype),
        channels_last=cfg.channels_last, max_batch=max_fit, max_batch_bound=max_batch,
        hit_bound=outcome.hit_bound, tries=outcome.tries, measurement=measurement,
        samples_per_s=fitted.samples_per_s if fitted else None,
        latency_ms=fitted.latency_ms if fitted else None,
        memory_cap_bytes=cap, allocator_before_bytes=allocated_before, allocator_after_bytes=allocated_after,
        cancelled=cancelled, duration_s=clock() - started,
        best_batch=fitted.batch if fitted else 0,
        best_try_samples_per_s=best_try.samples_per_s if best_try is not None else None,
        stop_rule=StopRule.CANCELLED if cancelled else outcome.stop_rule,
        stop_reason="cancelled" if cancelled else outcome.stop_reason,
        limit_found=limit_found, first_failure=first_failure, time_budget_s=time_budget_s, to_oom=to_oom,
        notes=notes, step=step.describe(), conditions=conditions,
    )


def measure_window(batch: int) -> str:
    """The label of the final measurement's window at `batch` (engine/run_conditions.py)."""
    return f"measure{batch}"


def _measure_best(runner: TryBatch, tries: list[BatchTry], warmup: int, iters: int,
                  release: Callable[[], object], on_progress: OnProgress | None, clock: Clock,
                  is_cancelled: ShouldCancel) -> list[BatchTry]:
    """The longer run at the batch whose try gave the most samples/s. Memory noise can still make it fail:
    then the best of the smaller batches is measured instead, and so on. Returns every measurement made,
    the one that counts last (none fitted: no batch could be measured)."""
    candidates = [t for t in tries if t.fits and t.samples_per_s is not None]
    made: list[BatchTry] = []
    while candidates and not is_cancelled():
        best = _best_of(candidates)
        if isinstance(runner, ModelBatchRunner):  # the GPU's conditions are read over this run (a try's are not)
            runner.window = measure_window(best.batch)
        try:
            m = run_try(runner, best.batch, "measure", warmup=warmup, iters=iters, clock=clock)
        finally:
            if isinstance(runner, ModelBatchRunner):
                runner.window = None
        if m is None:  # cancelled before one iteration ran
            break
        made.append(m)
        if on_progress is not None:
            on_progress(m)
        if m.fits:
            break
        release()
        candidates = [t for t in candidates if t.batch < m.batch]
    return made
