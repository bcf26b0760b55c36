"""Percentiles you can trust: each of p50, p90 and p99 with a distribution-free 95 % interval (two order statistics,
ranked by the binomial distribution), and marked unsupported when that interval reaches the smallest or the
largest sample (with 50 samples, p99 is the largest sample give or take)."""

from __future__ import annotations

import json
import random
import time

import numpy as np
import pytest
from scipy.stats import binom

from tests.test_cli import run
from torchperf_tui.core import stats
from torchperf_tui.core.stats import _binom_ppf, _ranks, percentile_interval, percentile_intervals, samples_needed


@pytest.mark.parametrize("n", [1, 2, 7, 50, 64, 300, 1000])
@pytest.mark.parametrize("q", [0.5, 0.9, 0.99])
def test_the_binomial_quantile_is_scipys(n, q):
    for p in (0.025, 0.975):
        assert _binom_ppf(p, n, q) == int(binom.ppf(p, n, q))


def test_the_samples_each_percentile_needs_are_recomputed_not_just_trusted(monkeypatch):
    monkeypatch.setattr(stats, "_NEEDED", {})
    assert [samples_needed(q) for q in (0.5, 0.9, 0.99)] == [9, 54, 555]
    for q, n in ((0.9, 54), (0.99, 555)):
        low, high = _ranks(n, q)
        assert low >= 2 and high <= n - 1  # inside at n ...
        low, high = _ranks(n - 1, q)
        assert not (low >= 2 and high <= n - 2)  # ... and not one sample earlier


def test_the_interval_is_two_order_statistics_and_the_value_is_numpys_percentile():
    rng = random.Random(3)
    samples = [rng.lognormvariate(0, 0.3) for _ in range(200)]
    ordered = sorted(samples)
    for q in (0.5, 0.9, 0.99):
        interval = percentile_interval(samples, q)
        assert interval.value_ms == pytest.approx(float(np.percentile(samples, q * 100)))
        low = int(binom.ppf(0.025, 200, q))
        high = int(binom.ppf(0.975, 200, q)) + 1
        assert interval.low_ms == ordered[low - 1]
        assert interval.high_ms == (ordered[high - 1] if high <= 200 else None)


def test_with_50_samples_p50_is_supported_p90_and_p99_are_not():
    p50, p90, p99 = percentile_intervals([float(i) for i in range(50)])
    assert p50.supported and p50.low_ms < p50.value_ms < p50.high_ms
    assert not p90.supported and p90.needed == 54
    assert not p99.supported and p99.high_ms is None  # the interval runs past the largest sample
    assert [i.name for i in (p50, p90, p99)] == ["p50", "p90", "p99"]
    assert all(i.supported for i in percentile_intervals([float(i) for i in range(600)]))


def test_the_p90_interval_covers_the_true_p90_about_95_percent_of_the_time():
    rng = random.Random(11)
    true_p90 = 0.9  # of Uniform(0, 1)
    trials, covered = 400, 0
    for _ in range(trials):
        interval = percentile_interval([rng.random() for _ in range(100)], 0.9)
        covered += interval.low_ms <= true_p90 <= interval.high_ms
    assert 0.93 <= covered / trials <= 0.995  # order-statistic intervals are a little conservative


def test_the_cli_gives_each_percentile_its_interval_or_says_it_is_not_supported(capsys):
    tiny = "tests.tinymodels:tiny_cnn"
    code, out, _ = run(capsys, "bench", tiny, "--input", "1x3x8x8", "--iters", "60", "--warmup", "1", "--no-history")
    lines = {line.split()[0]: line for line in out.splitlines() if line.strip()}
    assert code == 0 and "(95 % CI " in lines["p50"] and "(95 % CI " in lines["p90"]
    assert "not supported by 60 samples, needs 555: its 95 % CI reaches the largest sample" in lines["p99"]
    code, out, _ = run(capsys, "bench", tiny, "--input", "1x3x8x8", "--iters", "20", "--no-history", "--json")
    data = json.loads(out)
    assert [(p["q"], p["supported"], p["n"]) for p in data["percentiles"]] == [(0.5, True, 20), (0.9, False, 20),
                                                                             (0.99, False, 20)]


# -- the default run's length: p90 supported, within a time budget -----------------------------------------

def test_the_default_run_is_long_enough_for_p90():
    from torchperf_tui.engine.measurements.bench_config import DEFAULT_ITERS, BenchConfig

    assert DEFAULT_ITERS >= samples_needed(0.9) and BenchConfig(model="m").iters == DEFAULT_ITERS


def test_a_time_budget_stops_the_timed_iterations_and_says_so(capsys):
    from torchperf_tui.engine.measurements.bench_config import BenchConfig
    from torchperf_tui.engine.measurements.timing import run_benchmark, run_timed_loop

    loop = run_timed_loop(lambda: time.sleep(0.005), warmup=0, iters=100, budget_s=0.02)
    assert loop.budget_stopped and 1 <= len(loop.samples_ms) < 100
    assert not run_timed_loop(lambda: None, warmup=0, iters=5, budget_s=None).budget_stopped
    sleepy = "tests.engine.test_timing_modes:sleepy"
    result = run_benchmark(BenchConfig(model=sleepy, input_shape=(2, 4), device="cpu", warmup=0, iters=50,
                                       time_budget_s=0.03))
    assert result.budget_stopped and len(result.samples_ms) < 50 and result.iters_asked == 50
    code, out, _ = run(capsys, "bench", sleepy, "--input", "2x4", "--iters", "50", "--warmup", "0",
                       "--time-budget", "0.03", "--no-history")
    assert code == 0 and "stopped at the 0.03 s time budget after " in out and " of 50 timed iterations" in out
    code, out, _ = run(capsys, "bench", "tests.tinymodels:tiny_cnn", "--input", "1x3x8x8", "--warmup", "0",
                       "--no-history", "--json")
    data = json.loads(out)
    assert data["stats"]["n"] == 64 and not data["budget_stopped"]  # the default: 64 iterations, in budget
