"""The range a latency histogram spans follows the bulk of the samples (core.stats.bulk_range): a few
stalls of a busy host are counted and said at its edge instead of squashing the run into one bar beside them, and
a quiet run's own slow tail stays inside."""

from __future__ import annotations

import numpy as np

from torchperf_tui.app.widgets.timing.histogram import histogram_bins
from torchperf_tui.core.stats import bulk_range, runs_bulk_range
from torchperf_tui.wording.timing import outside_bulk_text


def disturbed(seed: int = 3) -> list[float]:
    """60 iterations of about 20 ms (a gamma tail, as a quiet CPU run has) and three stalls of 300-704 ms."""
    samples = list(20.0 + np.random.default_rng(seed).gamma(2.0, 0.6, 57))
    return samples[:5] + [300.0] + samples[5:30] + [512.0] + samples[30:] + [704.0]


def test_a_few_stalls_are_left_out_of_the_bins_and_counted_above():
    samples = disturbed()
    bulk = bulk_range(samples)
    bulk_max = max(s for s in samples if s < 100)
    assert (bulk.low, bulk.high) == (min(samples), bulk_max)  # from the fastest to the slowest of the bulk
    assert (bulk.below, bulk.above, bulk.outside) == (0, 3, 3) and bulk.highest == 704.0
    centres, counts, width = histogram_bins(samples, 8, bulk.low, bulk.high)
    assert sum(counts) == 57  # every sample of the bulk in a bin, the three stalls in none
    assert centres[0] - width / 2 == bulk.low and abs(centres[-1] + width / 2 - bulk_max) < 1e-9
    # Over the whole range the same 8 bins would hold the bulk in one: the run unreadable.
    _, whole, _ = histogram_bins(samples, 8)
    assert whole[0] == 57
    assert outside_bulk_text(bulk) == f"3 samples above {bulk_max:.2f} ms, up to 704 ms"


def test_a_quiet_runs_own_tail_stays_inside_and_nothing_is_said():
    samples = list(20.0 + np.random.default_rng(11).gamma(2.0, 0.6, 200))
    bulk = bulk_range(samples)
    assert (bulk.low, bulk.high, bulk.outside) == (min(samples), max(samples), 0)
    assert outside_bulk_text(bulk) == ""


def test_stalls_below_are_counted_too_and_one_is_one_sample():
    samples = [10.0 + 0.01 * i for i in range(40)] + [0.5]
    bulk = bulk_range(samples)
    assert (bulk.below, bulk.above, bulk.low, bulk.lowest) == (1, 0, 10.0, 0.5)
    assert outside_bulk_text(bulk) == "1 sample below 10.00 ms, down to 500 µs"


def test_few_or_equal_samples_keep_the_whole_range():
    assert bulk_range([]) is None
    few = bulk_range([1.0, 2.0, 50.0])  # too few to tell a bulk from a stall
    assert (few.low, few.high, few.outside) == (1.0, 50.0, 0)
    equal = bulk_range([5.0] * 30 + [9.0])  # the quartiles equal: the bulk is one value, nothing is left out
    assert (equal.low, equal.high, equal.outside) == (5.0, 9.0, 0)


def test_runs_on_shared_bins_keep_each_runs_bulk_a_slower_run_is_no_stall():
    fast = [[20.0 + 0.1 * (i % 10) for i in range(60)] for _ in range(5)]
    slow = [200.0 + 1.0 * (i % 10) for i in range(60)]
    stalled = fast[0][:59] + [900.0]
    bulk = runs_bulk_range([*fast[1:], slow, stalled])
    assert (bulk.low, bulk.high) == (20.0, 209.0)  # the slow run whole beside the fast ones
    assert (bulk.below, bulk.above, bulk.highest) == (0, 1, 900.0)  # the one stall said
    assert bulk_range([s for run in [*fast, slow] for s in run]).above == 60  # one pool would call the run stalls
    assert runs_bulk_range([[], []]) is None
