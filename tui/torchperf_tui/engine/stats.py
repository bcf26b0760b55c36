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

from torchperf_tui.engine.json_checks import finite_float, is_int, json_type, shown

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
