"""The one statistics type: what compute_stats summarises, fps when it is not finite, and reading it back
checked; no torch (the UI process and the history readers use it)."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys

import numpy as np
import pytest

from torchperf_tui.core.stats import TimingStats, compute_stats


def test_stats_match_numpy_on_known_samples():
    rng = np.random.default_rng(0)
    samples = list(rng.gamma(5.0, 2.0, size=1000))
    stats = compute_stats(samples, batch=4)
    assert stats.n == 1000
    assert stats.mean_ms == pytest.approx(np.mean(samples))
    assert stats.std_ms == pytest.approx(np.std(samples, ddof=1))
    assert stats.p50_ms == pytest.approx(np.median(samples))
    assert stats.p99_ms == pytest.approx(np.percentile(samples, 99))
    assert stats.iqr_ms == pytest.approx(np.percentile(samples, 75) - np.percentile(samples, 25))
    assert stats.min_ms <= stats.p50_ms <= stats.p90_ms <= stats.p99_ms <= stats.max_ms
    assert stats.fps == pytest.approx(4 * 1000 / np.mean(samples))
    assert stats.first_iter_ms is None
    assert compute_stats([]) is None


def test_one_sample_has_no_spread_and_the_first_iteration_is_carried():
    stats = compute_stats([2.0], batch=3, first_iter_ms=40.0)
    assert (stats.n, stats.std_ms, stats.iqr_ms, stats.p50_ms) == (1, 0.0, 0.0, 2.0)
    assert stats.fps == pytest.approx(1500.0) and stats.first_iter_ms == 40.0


def test_fps_is_none_not_infinite_when_the_mean_is_zero():
    # A timer too coarse for the model reads 0 ms; items per second is then not a number to show or save.
    stats = compute_stats([0.0, 0.0, 0.0], batch=8)
    assert stats.fps is None and stats.mean_ms == 0.0


def test_from_dict_reads_back_what_asdict_wrote_through_json():
    stats = compute_stats([1.0, 2.0, 4.0, 8.0], batch=2, first_iter_ms=30.0)
    assert TimingStats.from_dict(json.loads(json.dumps(dataclasses.asdict(stats)))) == stats
    no_fps = compute_stats([0.0], first_iter_ms=None)
    assert TimingStats.from_dict(json.loads(json.dumps(dataclasses.asdict(no_fps)))) == no_fps


def test_from_dict_takes_whole_number_latencies_and_an_absent_first_iteration():
    data = dataclasses.asdict(compute_stats([5.0, 5.0]))
    del data["first_iter_ms"]  # records from before it was kept
    data["p50_ms"] = 5
    stats = TimingStats.from_dict(data)
    assert stats.first_iter_ms is None and stats.p50_ms == 5.0 and isinstance(stats.p50_ms, float)


@pytest.mark.parametrize("change, problem", [
    ({"n": -1}, "stats.n is not a whole number >= 0: -1"),
    ({"n": True}, "stats.n is not a whole number >= 0: True"),
    ({"p90_ms": float("nan")}, "stats.p90_ms is not a finite number: nan"),
    ({"fps": "fast"}, "stats.fps is not a finite number: 'fast'"),
    ({"first_iter_ms": float("inf")}, "stats.first_iter_ms is not a finite number: inf"),
])
def test_from_dict_names_the_first_wrong_field(change, problem):
    data = {**dataclasses.asdict(compute_stats([1.0, 2.0])), **change}
    with pytest.raises(ValueError) as caught:
        TimingStats.from_dict(data)
    assert str(caught.value) == problem


def test_from_dict_names_missing_fields_and_a_non_object():
    data = dataclasses.asdict(compute_stats([1.0]))
    del data["p99_ms"], data["fps"]
    with pytest.raises(ValueError, match="^stats lacks p99_ms, fps$"):
        TimingStats.from_dict(data)
    with pytest.raises(ValueError, match="^stats is a JSON string, not an object$"):
        TimingStats.from_dict("fast")


def test_stats_module_imports_neither_torch_nor_numpy_until_asked():
    code = ("import sys, torchperf_tui.core.stats as s\n"
            "assert 'torch' not in sys.modules and 'numpy' not in sys.modules\n"
            "s.compute_stats([1.0, 2.0])\n"
            "assert 'torch' not in sys.modules\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]


def test_fps_at_the_median_is_what_the_median_says_and_the_mean_figure_stays_apart():
    # A slow tail: p50 30 ms, mean well above it. At the median, batch 1 makes about 33 items/s.
    stats = compute_stats([30.0] * 9 + [300.0], batch=1)
    assert stats.p50_ms == 30.0
    assert stats.fps_at_median == pytest.approx(1000.0 / 30.0)
    assert stats.fps == pytest.approx(10 * 1000.0 / (9 * 30.0 + 300.0))  # items over total time
    assert compute_stats([20.0, 20.0], batch=4).fps_at_median == pytest.approx(200.0)
    assert compute_stats([0.0], batch=1).fps_at_median is None
