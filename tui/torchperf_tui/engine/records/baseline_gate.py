"""The baseline gate's verdict: a run now against a baseline record, from the two samples.

The ratio is the median now over the median of the baseline (above 1: slower now). Its 95 % interval is
scipy.stats.bootstrap's, resampling each sample on its own (paired=False: the two runs' iterations are not
paired), and the two samples are tested with scipy.stats.mannwhitneyu. The difference is significant when the
test's p is under ALPHA and the interval leaves out 1. With the limit L = 1 + --fail-if-slower / 100:

- the gate fails (exit 1) when the run is significantly slower and its whole interval is past L (its low end above
  L): slower past the limit beyond doubt;
- it is ambiguous (exit 0, `ambiguous`; exit 1 with --fail-if-ambiguous) when the interval reaches past L (its high
  end above L) and the run does not fail: the interval straddles L, or the slowdown is not significant. The run may
  be past the limit or within it, and this run cannot tell which; nvbench's compare says AMBIGUOUS for the same
  reason, rather than turn a build red for noise or pass it as the same. More iterations narrow the interval;
- else it passes: faster, the same with an interval that stays within L, or slower within L.

A run marked disturbed (a noisy host, a window resized, ...) that would fail is not judged (exit 0, `not_judged`). A
disturbance slows a run; it does not make one faster, so a disturbed run that reads the same or faster still passes.

Why a default of 10 %: the samples of one run are not independent of the host's state over that run, so two
runs of the same build on one box differ by a few percent that the interval, taken within runs, does not cover
(bench/baseline_aa.py measures how often an A/A gate fails). 10 % is past that noise and well within what a
regression worth stopping a build for costs.

What differs between the two runs comes with the verdict: their set-up and flags (engine/records/history_compare.py,
as History compares two runs), the GPU's clocks and throttling, and the environment of the fingerprint (driver,
CUDA, cuDNN, torch, host, the host's load), so that a regression arrives with its likely cause. No torch here.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any, Sequence

from torchperf_tui.core.flag_table import gate_name
from torchperf_tui.engine.records.history_compare import compare_records, dict_diff, disturbance_note
from torchperf_tui.engine.records.history_records import HistoryRecord

ALPHA = 0.05
CONFIDENCE = 0.95
DEFAULT_FAIL_IF_SLOWER_PCT = 10.0
N_RESAMPLES = 4999
# Elements one vectorised call of the bootstrap resamples (each an index and a value): about 32 MB. Without a bound
# scipy resamples all 4999 at once, 4999 x n of each, which for a record of 100,000 samples is 8 GB.
BOOTSTRAP_BATCH_ELEMENTS = 2_000_000

EXIT_PASS, EXIT_SLOWER = 0, 1

# The fingerprint's keys a gate names when they differ: (key, label). Versions and names: any change counts.
ENV_KEYS = (("device_name", "device"), ("driver", "driver"), ("cuda_runtime", "CUDA"), ("cudnn", "cuDNN"),
            ("torch", "torch"), ("torchvision", "torchvision"), ("python", "Python"), ("platform", "OS"),
            ("cpu", "CPU"), ("hostname", "host"), ("gpu_power_limit_w", "GPU power limit (W)"),
            ("gpu_sm_clock_limit_mhz", "GPU SM clock limit (MHz)"), ("torchperf_tui", "torchperf-tui"))
# Readings that move a little between any two runs: named when they differ by more than the share given.
ENV_READINGS = (("gpu_sm_clock_mhz", "GPU SM clock (MHz)", 0.05), ("gpu_mem_clock_mhz", "GPU memory clock (MHz)", 0.05),
                ("gpu_power_mean_w", "GPU power (W)", 0.15))
# The host's load: named when other processes' use of the CPU differs by this many cores, or one run was noisy.
OTHER_BUSY_CORES_DELTA = 0.5


@dataclass
class GateResult:
    """A run now (`now_id`) against a baseline (`baseline_id`, from `baseline_source`).

    `verdict` is "faster", "slower" or "same"; `failed` when slower and significant with its whole interval past
    `fail_if_slower_pct` (or ambiguous, with `fail_if_ambiguous`), and the run now is not marked disturbed;
    `not_judged` when it would have failed but is (`disturbed`, its marks); `ambiguous` when the interval reaches past
    the limit and the run is not past it beyond doubt (the module's docstring has the rule).
    `differences`: (name, baseline value, value now) of the set-up and flags, with `typed` naming those the
    command line changed; `environment`: likewise for the environment; `notes`: throttling or a disturbance
    that may explain part of the ratio."""

    baseline_id: str
    now_id: str
    baseline_source: str
    baseline_p50_ms: float
    now_p50_ms: float
    ratio: float
    ci_low: float
    ci_high: float
    p_value: float
    significant: bool
    verdict: str
    fail_if_slower_pct: float
    failed: bool
    n_baseline: int
    n_now: int
    differences: list[tuple[str, Any, Any]] = field(default_factory=list)
    typed: list[str] = field(default_factory=list)
    environment: list[tuple[str, Any, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    disturbed: list[str] = field(default_factory=list)
    not_judged: bool = False
    ambiguous: bool = False
    fail_if_ambiguous: bool = False

    @property
    def exit_code(self) -> int:
        return EXIT_SLOWER if self.failed else EXIT_PASS

    @property
    def change_pct(self) -> float:
        """How much slower now, in percent (negative: faster)."""
        return (self.ratio - 1.0) * 100.0

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["differences"] = [{"name": n, "baseline": a, "now": b} for n, a, b in self.differences]
        data["environment"] = [{"name": n, "baseline": a, "now": b} for n, a, b in self.environment]
        data.update(exit_code=self.exit_code, change_pct=self.change_pct, alpha=ALPHA, confidence=CONFIDENCE)
        return data


def ratio_test(now: Sequence[float], baseline: Sequence[float], seed: int = 0) -> tuple[float, float, float, float]:
    """(ratio of medians now / baseline, its 95 % interval's low and high, Mann-Whitney U's two-sided p)."""
    import numpy as np
    from scipy import stats

    x, y = np.asarray(now, dtype=np.float64), np.asarray(baseline, dtype=np.float64)

    def median_ratio(a, b, axis=-1):
        return np.median(a, axis=axis) / np.median(b, axis=axis)

    ratio = float(median_ratio(x, y))
    if np.ptp(x) == 0 and np.ptp(y) == 0:  # two constant samples (a coarse timer): no spread to resample
        return ratio, ratio, ratio, 1.0 if ratio == 1.0 else 0.0
    batch = max(1, BOOTSTRAP_BATCH_ELEMENTS // max(len(x), len(y)))
    boot = stats.bootstrap((x, y), median_ratio, paired=False, vectorized=True, confidence_level=CONFIDENCE,
                           n_resamples=N_RESAMPLES, batch=min(batch, N_RESAMPLES), method="percentile",
                           random_state=np.random.default_rng(seed))
    p_value = float(stats.mannwhitneyu(x, y, alternative="two-sided").pvalue)
    return ratio, float(boot.confidence_interval.low), float(boot.confidence_interval.high), p_value


def is_significant(low: float, high: float, p_value: float) -> bool:
    """A ratio's difference from 1 is significant when Mann-Whitney's p is under ALPHA and its interval leaves out 1:
    the gate's rule, and that of a change point in the history (engine/records/change_points.py)."""
    return p_value < ALPHA and not (low <= 1.0 <= high)


def gate(baseline: HistoryRecord, now: HistoryRecord, *, fail_if_slower_pct: float = DEFAULT_FAIL_IF_SLOWER_PCT,
         fail_if_ambiguous: bool = False, source: str = "", typed: Sequence[str] = (), seed: int = 0) -> GateResult:
    """The verdict on `now` against `baseline` (both timing records with samples), with what differs.
    `typed`: the names (as in the differences) of what the command line set."""
    ratio, low, high, p_value = ratio_test(now.samples_ms, baseline.samples_ms, seed=seed)
    significant = is_significant(low, high, p_value)
    verdict = "same" if not significant else "slower" if ratio > 1.0 else "faster"
    limit = 1.0 + fail_if_slower_pct / 100.0
    past = verdict == "slower" and low > limit
    ambiguous = not past and high > limit
    past_limit = past or (ambiguous and fail_if_ambiguous)
    comparison = compare_records(baseline, now) if _comparable(baseline, now) else None
    differences = setup_and_flag_differences(baseline, now)
    notes = [n for n in (comparison.clock_note if comparison else None, disturbance_note(baseline, now)) if n]
    return GateResult(
        baseline_id=baseline.id, now_id=now.id, baseline_source=source,
        baseline_p50_ms=_median(baseline.samples_ms), now_p50_ms=_median(now.samples_ms), ratio=ratio,
        ci_low=low, ci_high=high, p_value=p_value, significant=significant, verdict=verdict,
        fail_if_slower_pct=fail_if_slower_pct, failed=past_limit and not now.disturbed,
        not_judged=past_limit and bool(now.disturbed), disturbed=list(now.disturbed), ambiguous=ambiguous,
        fail_if_ambiguous=fail_if_ambiguous,
        n_baseline=len(baseline.samples_ms), n_now=len(now.samples_ms), differences=differences,
        typed=[name for name, _, _ in differences if name in set(typed)],
        environment=environment_differences(baseline, now), notes=notes)


def _comparable(a: HistoryRecord, b: HistoryRecord) -> bool:
    return all(r.stats is not None and r.stats.p50_ms > 0 for r in (a, b))


def _median(samples: Sequence[float]) -> float:
    import statistics

    return float(statistics.median(samples))


def setup_and_flag_differences(baseline: HistoryRecord, now: HistoryRecord) -> list[tuple[str, Any, Any]]:
    """What was measured differently: the set-up (model, input, dtype, step, ...) then the flags, as
    History's comparison finds them (engine/records/history_compare.py), flags named as the command line does
    (core/flag_table.gate_name)."""
    setup = [(name, a, b) for name, (a, b) in dict_diff(baseline.setup(), now.setup()).items()]
    flags = [(gate_name(name), a, b) for name, (a, b) in dict_diff(baseline.flags, now.flags).items()]
    return setup + flags


def environment_differences(baseline: HistoryRecord, now: HistoryRecord) -> list[tuple[str, Any, Any]]:
    """What differs in the environment the two runs ran in: versions, device, host, GPU clocks, power limit and
    throttling, and the host's load (the CPU that other processes used)."""
    a, b = baseline.fingerprint, now.fingerprint
    found = [(label, a.get(key), b.get(key)) for key, label in ENV_KEYS
             if a.get(key) != b.get(key) and not (a.get(key) is None or b.get(key) is None)]
    for key, label, share in ENV_READINGS:
        x, y = _number(a.get(key)), _number(b.get(key))
        if x is not None and y is not None and abs(y - x) > share * max(abs(x), abs(y), 1e-9):
            found.append((label, x, y))
    throttled = (baseline.throttle_text() or "no", now.throttle_text() or "no")
    if throttled[0] != throttled[1]:
        found.append(("GPU throttling", *throttled))
    host = (_host(baseline), _host(now))
    if host[0] is not None and host[1] is not None and _host_differs(*host):
        found.append(("CPU", host[0]["text"], host[1]["text"]))
    return found


def _number(value: Any) -> float | None:
    if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
        return float(value)
    return None


def _host(record: HistoryRecord) -> dict[str, Any] | None:
    """The host's load over a record's timed run (its details' host_noise), as checked numbers and words."""
    noise = record.details.get("host_noise")
    if not isinstance(noise, dict):
        return None
    load, cores, other = (_number(noise.get(k)) for k in ("load", "cores", "other_busy_cores"))
    parts = []
    if load is not None:
        parts.append(f"load {load:.1f}" + (f" on {cores:.0f} cores" if cores else ""))
    if other is not None:
        parts.append(f"other processes busy on {other:.1f} cores")
    return {"noisy": noise.get("host_noisy") is True, "other": other, "text": ", ".join(parts) or "not read"}


def _host_differs(a: dict[str, Any], b: dict[str, Any]) -> bool:
    if a["noisy"] != b["noisy"]:
        return True
    return a["other"] is not None and b["other"] is not None and abs(a["other"] - b["other"]) >= OTHER_BUSY_CORES_DELTA
