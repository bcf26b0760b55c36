"""Capacity under a latency budget: the largest batch whose latency at the user's quantile stays within the budget
(`throughput --slo p99=20ms`), and every batch tried on the way, the frontier between latency and throughput.

Each batch is timed with as many passes as its quantile needs to be supported (core/stats.samples_needed: 555 for
p99, the '?' rule of every latency table here): its interval then lies inside the sample, and no one extreme pass
decides it. A batch *meets* the budget when its quantile is within it, *misses* when it is past it, and is *unknown*
when the time budget left too few passes to support the quantile (it is never chosen). The batch grows 1, 2, 4, ...
while it meets; at the first that misses (or does not fit) it bisects between the last that met and that one. The
search stops at a miss bisected to one batch, at the max-batch bound, or when the next batch, at the time a pass of
the last one took scaled by batch, would not end within the time budget.

Goodput is what a sustained run delivers within the budget: the items of the passes that took no longer than it, over
the time of all of them.

This module is the search alone, over a `try_batch(batch, warmup=, iters=)` callable (batch_search.run_try's): it
needs no torch, and its tests drive it with a fake one; engine/measurements/throughput.py builds the model.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from torchperf_tui.core.errors import TorchperfError
from torchperf_tui.core.formatting import format_ms
from torchperf_tui.core.slo import Slo
from torchperf_tui.core.stats import PercentileInterval, percentile_interval, samples_needed
from torchperf_tui.engine.hardware.host_noise import HostNoise
from torchperf_tui.engine.measurements.batch_search import (DEFAULT_MAX_BATCH, BatchTry, Clock, ShouldCancel, TryBatch,
                                                            run_try)

MEETS, MISSES, UNKNOWN, NO_FIT = "meets", "misses", "unknown", "does not fit"
POINT_WARMUP = 3  # passes before a batch's timed ones: its shape's first passes are not its steady state


@dataclass
class SloPoint:
    """One batch timed: its passes' median and quantile (with its interval), what it delivers, and the verdict."""

    batch: int
    phase: str  # "grow" or "bisect"
    verdict: str  # MEETS, MISSES, UNKNOWN or NO_FIT
    n: int = 0  # timed passes
    p50_ms: float | None = None
    quantile: PercentileInterval | None = None
    items_per_s: float | None = None  # passes x batch over their total time
    goodput_per_s: float | None = None  # the items of the passes within the budget over the time of all of them
    peak_bytes: int | None = None
    seconds: float | None = None  # the whole point: its input, warm-up and timed passes
    reason: str = ""  # why it did not fit
    host_noise: HostNoise | None = None

    @property
    def label(self) -> str:
        return f"batch {self.batch} ({self.phase})"

    def disturbance_marks(self) -> list[str]:
        return self.host_noise.warnings() if self.host_noise is not None else []

    def to_dict(self) -> dict[str, Any]:
        q = self.quantile
        return {"batch": self.batch, "phase": self.phase, "verdict": self.verdict, "n": self.n,
                "p50_ms": self.p50_ms, "quantile_ms": q.value_ms if q else None,
                "quantile_ci_ms": [q.low_ms, q.high_ms] if q else None,
                "quantile_supported": q.supported if q else None, "items_per_s": self.items_per_s,
                "goodput_per_s": self.goodput_per_s, "peak_bytes": self.peak_bytes, "seconds": self.seconds,
                "reason": self.reason, "disturbance_marks": self.disturbance_marks()}


@dataclass
class SloOutcome:
    points: list[SloPoint] = field(default_factory=list)  # in the order tried
    chosen: SloPoint | None = None  # the largest batch that met the budget
    stop_reason: str = ""  # one sentence: what ended the search
    cancelled: bool = False


def point_of(tried: BatchTry, slo: Slo, needed: int) -> SloPoint:
    """A batch tried (batch_search.BatchTry, its passes kept) as a point of the frontier, judged against `slo`."""
    if not tried.fits:
        return SloPoint(tried.batch, tried.phase, NO_FIT, peak_bytes=tried.peak_bytes, seconds=tried.seconds,
                        reason=tried.reason)
    samples = tried.samples_ms
    quantile = percentile_interval(samples, slo.q)
    total_s = sum(samples) / 1000.0
    within = sum(1 for ms in samples if ms <= slo.budget_ms)
    if quantile.value_ms > slo.budget_ms and quantile.supported:
        verdict = MISSES
    elif len(samples) >= needed and quantile.supported:
        verdict = MEETS
    else:
        verdict = UNKNOWN  # too few passes to tell, or a quantile past the budget that the sample cannot support
    return SloPoint(tried.batch, tried.phase, verdict, n=len(samples),
                    p50_ms=percentile_interval(samples, 0.5).value_ms, quantile=quantile,
                    items_per_s=len(samples) * tried.batch / total_s if total_s > 0 else None,
                    goodput_per_s=within * tried.batch / total_s if total_s > 0 else None,
                    peak_bytes=tried.peak_bytes, seconds=tried.seconds, host_noise=tried.host_noise)


def search_slo(try_batch: TryBatch, slo: Slo, *, max_batch: int = DEFAULT_MAX_BATCH,
               time_budget_s: float | None = None, budget_started: float | None = None,
               clock: Clock = time.monotonic, release: Callable[[], object] | None = None,
               on_point: Callable[[SloPoint], None] | None = None,
               should_cancel: ShouldCancel | None = None) -> SloOutcome:
    """The largest batch within `slo` (see the module docstring). The first batch always starts; `try_batch` may end a
    batch's passes early (the caller's time budget): a batch left with too few passes to support the quantile is
    unknown, and the search ends there."""
    if max_batch < 1:
        raise TorchperfError(f"the max batch must be at least 1, got {max_batch}")
    needed = samples_needed(slo.q)
    started = clock() if budget_started is None else budget_started
    out = SloOutcome()
    cancelled = should_cancel or (lambda: False)
    lo: SloPoint | None = None  # the largest batch that met the budget
    hi: int | None = None  # the smallest that missed it or did not fit

    def left() -> float:
        return math.inf if time_budget_s is None else time_budget_s - (clock() - started)

    def affordable(batch: int) -> bool:
        """The next batch's passes at the last point's time a pass, scaled by batch, end within the budget."""
        last = next((p for p in reversed(out.points) if p.n and p.seconds), None)
        if last is None:
            return True
        per_pass_s = last.seconds / (last.n + POINT_WARMUP + 1)
        return per_pass_s * batch / last.batch * (needed + POINT_WARMUP + 1) <= left()

    def measure(batch: int, phase: str, where: str) -> SloPoint | None:
        """The point of `batch`; None when no pass of it ran: cancelled (said in `out`: where the search was, `where`),
        or the time budget ended before its first timed pass (`try_batch` stops its passes there)."""
        if cancelled():  # between two batches
            out.cancelled, out.stop_reason = True, f"cancelled {where}, before batch {batch}"
            return None
        tried = run_try(try_batch, batch, phase, warmup=POINT_WARMUP, iters=needed, clock=clock)
        if cancelled():  # as the batch ran: what it timed is not kept
            out.cancelled, out.stop_reason = True, f"cancelled {where}, during batch {batch}"
            return None
        if tried is None:
            out.stop_reason = f"time budget: it ended before batch {batch}'s first timed pass"
            return None
        point = point_of(tried, slo, needed)
        if not tried.fits and release is not None:
            release()
        out.points.append(point)
        if on_point is not None:
            on_point(point)
        return point

    def step(batch: int, phase: str, where: str, what: str, why: str = "") -> SloPoint | None:
        """`batch`'s point; None when the search stops before it: its passes would not end within the time budget
        (said in `out`: `what` would not end within it, `why`), or as `measure` says."""
        if out.points and not affordable(batch):
            out.stop_reason = f"time budget: {what} would not end within the {time_budget_s:g} s budget{why}"
            return None
        return measure(batch, phase, where)

    batch = 1
    while True:  # grow: 1, 2, 4, ... while each meets the budget
        point = step(batch, "grow", "while growing", f"batch {batch}", f" ({needed} passes for a supported {slo.name})")
        if point is None:
            break
        if point.verdict != MEETS:
            hi = batch
            break
        lo = point
        if batch >= max_batch:
            out.stop_reason = f"max-batch: batch {batch} met the budget at the bound (--max-batch)"
            break
        batch = min(batch * 2, max_batch)
    while (not out.cancelled and lo is not None and hi is not None and hi - lo.batch > 1
           and out.points[-1].verdict != UNKNOWN):  # bisect, unless the time budget cut the last batch short
        mid, between = (lo.batch + hi) // 2, f"between {lo.batch} and {hi}"
        point = step(mid, "bisect", f"while bisecting {between}", f"bisecting {between}, batch {mid}")
        if point is None:
            break
        if point.verdict == MEETS:
            lo = point
        else:
            hi = mid
    out.chosen = lo
    short = next((p for p in reversed(out.points) if p.verdict == UNKNOWN), None)
    if short is not None and not out.stop_reason:  # (a cancel, a time budget said their reason as they stopped it)
        out.stop_reason = (f"time budget: batch {short.batch} ran {short.n} of the {needed} passes its {slo.name} "
                           "needs to be supported" + (f"; batch {lo.batch} is the largest that meets it"
                                                      if lo is not None else ""))
    elif not out.stop_reason and hi is not None:
        first = next(p for p in out.points if p.batch == hi)
        out.stop_reason = f"batch {hi} {miss_text(first, slo)}" + (
            f"; batch {lo.batch} is the largest that meets it" if lo is not None else "")
    return out


def miss_text(point: SloPoint, slo: Slo) -> str:
    """Why a point is not within the budget, in words: 'misses it: p99 31.20 ms', 'does not fit: ...', or
    'is unknown: p99 needs 555 passes, 120 ran'."""
    if point.verdict == NO_FIT:
        return f"does not fit: {point.reason}"
    q = point.quantile
    if point.verdict == MISSES:
        return f"misses it: {slo.name} {format_ms(q.value_ms)}"
    return f"is unknown: {slo.name} needs {q.needed} passes to be supported, {point.n} ran"
