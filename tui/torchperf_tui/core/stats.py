"""The summary of a run's timed samples: one type for the engine's results, the UI's live numbers and the
history's records.

No torch here, ever: the TUI's UI process recomputes the statistics as samples stream in, and `history` and
`export` read them back from the history file, without paying 2-3 s for torch. numpy is imported by
`compute_stats` only, so reading a history needs no numpy either.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Sequence

from torchperf_tui.core.json_checks import finite_float, is_int, json_type, shown

# The fields every summary has, all finite latencies in milliseconds.
LATENCY_FIELDS = ("mean_ms", "std_ms", "min_ms", "max_ms", "p50_ms", "p90_ms", "p99_ms", "iqr_ms")


@dataclass(frozen=True)
class TimingStats:
    """Summary of the timed samples, in milliseconds; fps counts input items (batch x iterations) per second.
    `first_iter_ms` is the first iteration, kept out of the samples (its one-off costs would skew them)."""

    n: int
    mean_ms: float
    std_ms: float
    min_ms: float
    max_ms: float
    p50_ms: float
    p90_ms: float
    p99_ms: float
    iqr_ms: float
    fps: float | None  # None only when it is not finite (a zero mean)
    first_iter_ms: float | None = None

    @classmethod
    def from_dict(cls, data: Any) -> "TimingStats":
        """The inverse of `dataclasses.asdict`, checked: n a whole number >= 0, every latency a finite number,
        fps and first_iter_ms a finite number or null. Raises ValueError naming the first field that is not."""
        if not isinstance(data, dict):
            raise ValueError(f"stats is a JSON {json_type(data)}, not an object")
        missing = [name for name in ("n", *LATENCY_FIELDS, "fps") if name not in data]
        if missing:
            raise ValueError(f"stats lacks {', '.join(missing)}")
        n = data["n"]
        if not is_int(n) or n < 0:
            raise ValueError(f"stats.n is not a whole number >= 0: {shown(n)}")
        values: dict[str, Any] = {"n": n}
        for name in LATENCY_FIELDS:
            values[name] = finite_float(data[name], f"stats.{name}")
        for name in ("fps", "first_iter_ms"):
            value = data.get(name)
            values[name] = None if value is None else finite_float(value, f"stats.{name}")
        return cls(**values)

    @property
    def fps_at_median(self) -> float | None:
        """Items per second at the median latency: what a reader of "p50 30 ms" expects beside it (about 33/s
        at batch 1). `fps` is items over total time, the mean's figure; a slow tail pulls it below this."""
        if self.fps is None or self.p50_ms <= 0 or self.mean_ms <= 0:
            return None
        return self.fps * self.mean_ms / self.p50_ms  # = items per iteration x 1000 / p50


def items_per_second(items: float, total_ms: float) -> float | None:
    """`items` over `total_ms` milliseconds, per second; None when that is not a finite number."""
    if total_ms <= 0:
        return None
    rate = items * 1000.0 / total_ms
    return rate if math.isfinite(rate) else None


def compute_stats(samples_ms: Sequence[float], batch: int = 1,
                  first_iter_ms: float | None = None) -> TimingStats | None:
    """The summary of `samples_ms` (None when there are none); fps counts `batch` items per sample."""
    if len(samples_ms) == 0:
        return None
    import numpy as np  # here, not at the top: reading a history file needs no numpy

    a = np.asarray(samples_ms, dtype=np.float64)
    p25, p50, p75, p90, p99 = np.percentile(a, [25, 50, 75, 90, 99])
    mean = float(a.mean())
    return TimingStats(
        n=int(a.size),
        mean_ms=mean,
        std_ms=float(a.std(ddof=1)) if a.size > 1 else 0.0,
        min_ms=float(a.min()),
        max_ms=float(a.max()),
        p50_ms=float(p50),
        p90_ms=float(p90),
        p99_ms=float(p99),
        iqr_ms=float(p75 - p25),
        fps=items_per_second(batch, mean),
        first_iter_ms=first_iter_ms,
    )


# -- confidence in the percentiles --------------------------------------------------------------------------
CONFIDENCE = 0.95
PERCENTILES = (0.5, 0.9, 0.99)


@dataclass(frozen=True)
class PercentileInterval:
    """A percentile of the samples with its distribution-free confidence interval: two order statistics of the
    sample whose ranks come from the binomial distribution (the count of samples below the true percentile is
    Binomial(n, q)). `low_ms`/`high_ms` are None where the interval reaches past the smallest or the largest
    sample. The percentile is *supported* when its interval lies strictly inside the sample, neither end the
    smallest or the largest sample: then no single extreme sample decides it. With 50 samples p99 is not (it
    is the largest sample, give or take), and p90 needs 54."""

    q: float
    value_ms: float
    low_ms: float | None
    high_ms: float | None
    n: int
    supported: bool
    needed: int  # the fewest samples that support this percentile

    @property
    def name(self) -> str:
        return f"p{self.q * 100:g}"


def _binom_ppf(p: float, n: int, q: float) -> int:
    """The smallest k with P(B <= k) >= p for B ~ Binomial(n, q) (scipy.stats.binom.ppf, in plain Python: the
    UI process recomputes intervals as samples arrive, and importing scipy there would stall a frame)."""
    log_q, log_r = math.log(q), math.log1p(-q)
    base = math.lgamma(n + 1)
    total = 0.0
    for k in range(n + 1):
        total += math.exp(base - math.lgamma(k + 1) - math.lgamma(n - k + 1) + k * log_q + (n - k) * log_r)
        if total >= p * (1 - 1e-12):  # a hair under p: the float sum of the pmf must not step past the true k
            return k
    return n


def _ranks(n: int, q: float, confidence: float = CONFIDENCE) -> tuple[int, int]:
    """The 1-based ranks (l, u) of the order statistics bounding the q-quantile's interval: coverage
    P(l <= B <= u - 1) >= confidence for B ~ Binomial(n, q). l < 1 or u > n: that end is past the sample."""
    alpha = 1.0 - confidence
    return _binom_ppf(alpha / 2, n, q), _binom_ppf(1 - alpha / 2, n, q) + 1


def _inside(n: int, q: float, confidence: float) -> bool:
    low, high = _ranks(n, q, confidence)
    return low >= 2 and high <= n - 1


# (q, confidence) -> samples needed; the usual three are known (tests recompute them), so no frame waits for them
_NEEDED: dict[tuple[float, float], int] = {(0.5, 0.95): 9, (0.9, 0.95): 54, (0.99, 0.95): 555}


def samples_needed(q: float, confidence: float = CONFIDENCE) -> int:
    """The fewest samples whose interval for the q-quantile lies strictly inside the sample (see
    PercentileInterval): 9 for p50, 54 for p90, 555 for p99 at 95 %."""
    key = (q, confidence)
    if key not in _NEEDED:
        n = 3
        while not _inside(n, q, confidence):
            n += 1 if _inside(2 * n, q, confidence) else n  # double while far off, then step to the first
        _NEEDED[key] = n
    return _NEEDED[key]


def percentile_supported(q: float, n: int) -> bool:
    """Whether `n` samples support the q-quantile (its interval lies inside the sample; see samples_needed)."""
    return n >= samples_needed(q)


def _percentile(ordered: Sequence[float], q: float) -> float:
    """numpy.percentile's default (linear between the two nearest ranks), on sorted values."""
    position = (len(ordered) - 1) * q
    below = math.floor(position)
    above = min(below + 1, len(ordered) - 1)
    return ordered[below] + (ordered[above] - ordered[below]) * (position - below)


def percentile_interval(samples_ms: Sequence[float], q: float, confidence: float = CONFIDENCE) -> PercentileInterval:
    """The q-quantile of `samples_ms` (linear interpolation, as TimingStats has it) and its interval."""
    ordered = sorted(float(v) for v in samples_ms)
    n = len(ordered)
    if n == 0:
        raise ValueError("no samples")
    low, high = _ranks(n, q, confidence)
    return PercentileInterval(q=q, value_ms=_percentile(ordered, q), low_ms=ordered[low - 1] if low >= 1 else None,
                              high_ms=ordered[high - 1] if high <= n else None, n=n,
                              supported=low >= 2 and high <= n - 1, needed=samples_needed(q, confidence))


def percentile_intervals(samples_ms: Sequence[float]) -> list[PercentileInterval]:
    """p50, p90 and p99 with their intervals; none without samples."""
    return [percentile_interval(samples_ms, q) for q in PERCENTILES] if len(samples_ms) else []


# -- how far the samples spread above the fastest one --------------------------------------------------------
def p50_over_min(samples_ms: Sequence[float]) -> float | None:
    """The median sample over the fastest one (1.0: half the samples were as fast as the fastest); None without
    samples or with a fastest sample of 0 ms. On a quiet machine a fixed-shape run stays close to 1 (boost
    clocks and cache state move it a few percent); a run that shared its cores with other work does not."""
    if len(samples_ms) == 0:
        return None
    ordered = sorted(float(v) for v in samples_ms)
    if ordered[0] <= 0:
        return None
    return _percentile(ordered, 0.5) / ordered[0]


def share_above(samples_ms: Sequence[float], factor: float) -> float | None:
    """The share of samples slower than `factor` times the fastest one; None without samples."""
    if len(samples_ms) == 0:
        return None
    fastest = min(samples_ms)
    return sum(1 for v in samples_ms if v > factor * fastest) / len(samples_ms)


# -- the bulk of the samples, and what lies far outside it --------------------------------------------------
FENCE_IQRS = 3.0  # Tukey's "far out" fences: a slow tail of a quiet run stays inside, a stall of a busy host does not


@dataclass(frozen=True)
class Bulk:
    """The range a histogram of the samples spans: from the smallest to the largest sample inside the fences
    (FENCE_IQRS interquartile ranges below the first quartile and above the third), and how many samples lie
    outside it, below and above, down to `lowest` and up to `highest`. Every sample inside when the quartiles
    are equal (the bulk is one value) or there are fewer than 4 samples."""

    low: float
    high: float
    below: int
    above: int
    lowest: float
    highest: float

    @property
    def outside(self) -> int:
        return self.below + self.above


def bulk_range(samples_ms: Sequence[float], fence_iqrs: float = FENCE_IQRS) -> Bulk | None:
    """The Bulk of `samples_ms` (None without samples): one stall of 700 ms among samples of 20 ms leaves the
    histogram the 20 ms and says the one above."""
    ordered = sorted(float(v) for v in samples_ms)
    if not ordered:
        return None
    lowest, highest = ordered[0], ordered[-1]
    q1, q3 = _percentile(ordered, 0.25), _percentile(ordered, 0.75)
    if len(ordered) < 4 or q3 <= q1:
        return Bulk(lowest, highest, 0, 0, lowest, highest)
    fence_low, fence_high = q1 - fence_iqrs * (q3 - q1), q3 + fence_iqrs * (q3 - q1)
    inside = [v for v in ordered if fence_low <= v <= fence_high]  # never empty: the quartiles lie between
    return Bulk(inside[0], inside[-1], sum(1 for v in ordered if v < fence_low),
                sum(1 for v in ordered if v > fence_high), lowest, highest)


def runs_bulk_range(runs: Sequence[Sequence[float]], fence_iqrs: float = FENCE_IQRS) -> Bulk | None:
    """The Bulk of several runs drawn on shared bins: from the lowest of their bulks to the highest (a slower run is
    no stall of a faster one's), and the samples of any run outside that; None without samples."""
    bulks = [bulk for bulk in (bulk_range(run, fence_iqrs) for run in runs) if bulk is not None]
    if not bulks:
        return None
    low, high = min(b.low for b in bulks), max(b.high for b in bulks)
    every = [float(v) for run in runs for v in run]
    return Bulk(low, high, sum(1 for v in every if v < low), sum(1 for v in every if v > high), min(every),
                max(every))
