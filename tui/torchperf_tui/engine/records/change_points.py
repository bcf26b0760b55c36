"""Change points in the history: where the median latency of one set-up stepped, and what else changed with it.

A series is the records of one set-up, in file order (oldest first), under the name an export's chart joins them by
(engine/records/fleet_records.setup_name: model, overrides, input, dtype, step, compile, quantization, attention,
KV cache, flags, device); cancelled records and those without a timed sample are left out. Its value per record is
the record's median (p50).

The change points are found by ruptures' kernel change-point detection (KernelCPD: PELT in C over a Gaussian (RBF)
kernel's cost, nonparametric like Apache Otava's E-divisive: it sees the level of the series move, and one slow
record among many does not pull a segment of its own), run on the logarithm of the medians (a step is a ratio, the
same at 1 ms as at 100 ms) counted in the series' own noise: the median absolute difference between one record's
median and the next, which a step moves by one difference only. Segments hold at least MIN_SEGMENT records, so a
series of fewer than MIN_RECORDS is too short and is said to be, not analysed. The penalty of a change point is
log(n), BIC's; bench/change_points.py measures what this finds in noise alone and in planted steps
(bench/results/change_points.txt).

Each change point found is then tested as the gate tests two runs (engine/records/baseline_gate.py: ratio_test and
is_significant): the medians of the records after it, up to the next change point, against those before it, back to
the one before; the ratio of their medians, its 95 % bootstrap interval and Mann-Whitney's p. One that is not
significant is dropped, the weakest first, and the others are tested again on the longer segments that leaves. What
differs in the environment between the last record before a change point and the first after it (driver, torch,
clocks, host, the host's load: the gate's own diff, environment_differences) comes with it.

No torch here; numpy and ruptures (with scipy, about a second of imports) are imported when a series is analysed.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Sequence

from torchperf_tui.engine.records.baseline_gate import environment_differences, is_significant, ratio_test
from torchperf_tui.engine.records.fleet_records import setup_name
from torchperf_tui.engine.records.history_records import HistoryRecord

# The fewest records on either side of a change point: one or two slow records are an outlier, not a step; and the
# test each change point passes (Mann-Whitney, two-sided, p < 0.05) can pass at 4 against 4 (smallest p 0.029), never
# at 3 against 3 or 4 (0.10, 0.057): a series too short for it is said to be, not called steady.
MIN_SEGMENT = 4
MIN_RECORDS = 2 * MIN_SEGMENT
# The Gaussian kernel's gamma on values counted in noise units: exp(-d**2 / 2), a kernel one noise unit wide.
KERNEL_GAMMA = 0.5
# The median absolute deviation of a normal sample over its standard deviation: MAD / 0.6745 estimates sigma.
MAD_TO_SIGMA = 0.6745


@dataclass(frozen=True)
class SeriesPoint:
    """One record of a series: its id, when it finished and its median."""

    record_id: str
    created_at: str
    p50_ms: float


@dataclass
class ChangePoint:
    """A step in a series before the record `record_id` (the first after it, `index` in the series) and after
    `previous_id` (the last before it). `before_p50_ms` and `after_p50_ms` are the medians of the records' medians
    on each side (`n_before`, `n_after` records, each back or on to the next change point); `ratio` after / before
    with its 95 % interval and Mann-Whitney's p; `environment`: (name, value before, value after) of what differs
    between the two records beside it."""

    index: int
    record_id: str
    created_at: str
    previous_id: str
    before_p50_ms: float
    after_p50_ms: float
    ratio: float
    ci_low: float
    ci_high: float
    p_value: float
    n_before: int
    n_after: int
    environment: list[tuple[str, Any, Any]] = field(default_factory=list)

    @property
    def change_pct(self) -> float:
        """How much slower after, in percent (negative: faster)."""
        return (self.ratio - 1.0) * 100.0

    def to_dict(self) -> dict[str, Any]:
        return {"record_id": self.record_id, "created_at": self.created_at, "previous_id": self.previous_id,
                "index": self.index, "before_p50_ms": self.before_p50_ms, "after_p50_ms": self.after_p50_ms,
                "ratio": self.ratio, "ci_low": self.ci_low, "ci_high": self.ci_high,
                "change_pct": self.change_pct, "p_value": self.p_value, "n_before": self.n_before,
                "n_after": self.n_after,
                "environment": [{"name": n, "before": a, "after": b} for n, a, b in self.environment]}


@dataclass
class Series:
    """The records of one set-up (`setup`, its name) and the change points found in them; `changes` is None when
    the series is too short to analyse (fewer than MIN_RECORDS)."""

    setup: str
    points: list[SeriesPoint]
    changes: list[ChangePoint] | None

    @property
    def too_short(self) -> bool:
        return self.changes is None

    def to_dict(self) -> dict[str, Any]:
        return {"setup": self.setup, "records": len(self.points), "first_id": self.points[0].record_id,
                "last_id": self.points[-1].record_id, "too_short": self.too_short, "min_records": MIN_RECORDS,
                "change_points": [change.to_dict() for change in self.changes or []]}


def series_of(records: Iterable[HistoryRecord]) -> dict[str, list[SeriesPoint]]:
    """The records' medians by set-up, each series in file order; the set-ups in the order they first appear.
    Records are read once and only their points kept: a history of any size takes its points' memory."""
    series: dict[str, list[SeriesPoint]] = {}
    for record in records:
        stats = record.stats
        if record.cancelled or stats is None or stats.n == 0 or not (math.isfinite(stats.p50_ms) and stats.p50_ms > 0):
            continue
        series.setdefault(setup_name(record), []).append(SeriesPoint(record.id, record.created_at, stats.p50_ms))
    return series


def change_points(points: Sequence[SeriesPoint], seed: int = 0) -> list[ChangePoint] | None:
    """The significant change points of one series, oldest first, without their environment; None when the series
    has fewer than MIN_RECORDS points. `seed`: the bootstrap's."""
    if len(points) < MIN_RECORDS:
        return None
    values = [point.p50_ms for point in points]
    edges = _candidates(values)
    while edges:
        tests = [_tested(points, values, edges, i, seed) for i in range(len(edges))]
        weak = [i for i, change in enumerate(tests) if not is_significant(change.ci_low, change.ci_high,
                                                                            change.p_value)]
        if not weak:
            return tests
        del edges[max(weak, key=lambda i: tests[i].p_value)]  # the weakest first; the others tested again
    return []


def history_changes(records: Iterable[HistoryRecord], again: Callable[[], Iterable[HistoryRecord]],
                    seed: int = 0) -> list[Series]:
    """Every series of `records` with its change points, each with what differs in the environment between the
    records beside it. `records` is read once for the medians; `again()` reads the same records once more for the
    records beside a change point, so that only those are kept whole."""
    found = [Series(name, points, change_points(points, seed)) for name, points in series_of(records).items()]
    wanted = {(series.setup, record_id) for series in found for change in series.changes or []
              for record_id in (change.previous_id, change.record_id)}
    if not wanted:
        return found
    ids = {record_id for _, record_id in wanted}
    beside: dict[tuple[str, str], HistoryRecord] = {}
    for record in again():
        if record.id in ids and (setup_name(record), record.id) in wanted:
            beside[(setup_name(record), record.id)] = record
    for series in found:
        for change in series.changes or []:
            before, after = beside.get((series.setup, change.previous_id)), beside.get((series.setup, change.record_id))
            if before is not None and after is not None:  # else the file changed between the two reads
                change.environment = environment_differences(before, after)
    return found


def _candidates(values: Sequence[float]) -> list[int]:
    """Where ruptures' KernelCPD puts change points in the log of `values` counted in noise units: the index of the
    first value after each."""
    import numpy as np  # numpy and ruptures: kept off `history`'s start and the app's until a series is analysed
    import ruptures

    x = np.log(np.asarray(values, dtype=np.float64))
    steps = np.diff(x)
    noise = float(np.median(np.abs(steps - np.median(steps)))) / MAD_TO_SIGMA / math.sqrt(2.0)
    if noise == 0.0:  # most records read the same median (a coarse timer): the typical step is the mean one
        noise = float(np.mean(np.abs(steps))) / math.sqrt(2.0)
    if noise == 0.0:  # every record the same
        return []
    z = ((x - np.median(x)) / noise).reshape(-1, 1)
    detector = ruptures.KernelCPD(kernel="rbf", min_size=MIN_SEGMENT, params={"gamma": KERNEL_GAMMA}).fit(z)
    return [int(b) for b in detector.predict(pen=math.log(len(values)))[:-1]]  # the last is the series' end


def _tested(points: Sequence[SeriesPoint], values: Sequence[float], edges: Sequence[int], i: int,
            seed: int) -> ChangePoint:
    """The change point at edges[i], tested on the records between the change points either side of it."""
    start = edges[i - 1] if i > 0 else 0
    at = edges[i]
    end = edges[i + 1] if i + 1 < len(edges) else len(values)
    before, after = values[start:at], values[at:end]
    ratio, low, high, p_value = ratio_test(after, before, seed=seed)
    return ChangePoint(index=at, record_id=points[at].record_id, created_at=points[at].created_at,
                       previous_id=points[at - 1].record_id, before_p50_ms=float(statistics.median(before)),
                       after_p50_ms=float(statistics.median(after)), ratio=ratio, ci_low=low, ci_high=high,
                       p_value=p_value, n_before=len(before), n_after=len(after))

