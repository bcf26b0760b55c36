"""The batch search alone (engine/measurements/batch_search.py), driven by fake "measure a batch" functions: no torch."""

import subprocess
import sys
from pathlib import Path

import pytest

from torchperf_tui.engine.measurements.batch_search import (BatchTry, MemoryCapExceeded, StopRule, is_out_of_memory,
                                               search_max_batch)
from torchperf_tui.core.errors import TorchperfError
from tests.fakes.fake_tries import PEAK_AT_8, FakeClock, OutOfMemory, oom_above, rate_curve, slow_passes


# -- the search ----------------------------------------------------------------------------------------


def test_grows_geometrically_then_bisects_to_the_exact_limit():
    calls: list[int] = []
    progress: list[BatchTry] = []
    out = search_max_batch(oom_above(12, calls), max_batch=1024, on_progress=progress.append)
    assert out.max_batch == 12
    assert calls == [1, 2, 4, 8, 16, 12, 14, 13]
    assert [t.phase for t in out.tries] == ["grow"] * 5 + ["bisect"] * 3
    assert [t.fits for t in out.tries] == [True, True, True, True, False, True, False, False]
    assert "out of memory at batch 16" in out.tries[4].reason
    assert progress == out.tries
    assert not out.hit_bound and not out.cancelled


@pytest.mark.parametrize("limit", [1, 2, 3, 5, 37, 100, 511, 1000])
def test_finds_any_limit(limit):
    assert search_max_batch(oom_above(limit), max_batch=1024).max_batch == limit


def test_max_batch_bound_stops_growth_and_is_reported():
    calls: list[int] = []
    out = search_max_batch(oom_above(10**9, calls), max_batch=100)
    assert calls == [1, 2, 4, 8, 16, 32, 64, 100]
    assert out.max_batch == 100 and out.hit_bound
    assert out.stop_rule is StopRule.MAX_BATCH and not out.limit_found and out.first_failure is None
    assert out.stop_reason == "stopped growing at the max-batch bound 100: larger batches may fit"


def test_out_of_memory_stops_growth_is_named_and_bisected():
    out = search_max_batch(oom_above(12), max_batch=1024)
    assert out.stop_rule is StopRule.OOM and out.limit_found and (out.max_batch, out.first_failure) == (12, 13)
    assert out.stop_reason == "stopped growing at batch 16: out of memory; bisection: 12 fits, 13 does not"
    assert [t.failed_on for t in out.tries if not t.fits] == ["oom", "oom", "oom"]


def test_memory_cap_stops_growth_and_is_named_apart_from_out_of_memory():
    def capped(batch, warmup, iters):
        if batch > 12:
            raise MemoryCapExceeded("over the CPU memory cap: needs about 1 GiB, cap 512 MiB")
        return [1.0] * iters

    out = search_max_batch(capped, max_batch=1024)
    assert out.stop_rule is StopRule.MEMORY_CAP and (out.max_batch, out.first_failure) == (12, 13)
    assert out.stop_reason.startswith("stopped growing at batch 16: over the CPU memory cap")


# -- the plateau rule ----------------------------------------------------------------------------------


def test_growth_stops_two_doublings_after_the_best_samples_per_second_without_bisecting():
    calls: list[int] = []
    out = search_max_batch(rate_curve(PEAK_AT_8, calls=calls), max_batch=1024)
    assert calls == [1, 2, 4, 8, 16, 32]  # was 1, 2, ... 1024: a pass at 1024 took 32 s on the CPU
    assert out.stop_rule is StopRule.PLATEAU and not out.hit_bound and not out.cancelled
    assert out.stop_reason == ("stopped growing at batch 32: samples/s fell below the best (batch 8, 400.0/s) "
                               "for two doublings")
    assert out.best.batch == 8 and out.best.samples_per_s == pytest.approx(400)
    # Not bisected, and the limit is not claimed: 32 fits, nothing larger was tried.
    assert {t.phase for t in out.tries} == {"grow"}
    assert out.max_batch == 32 and not out.limit_found and out.first_failure is None


@pytest.mark.parametrize("doublings, last, best", [(1, 4, 2), (2, 32, 8), (3, 64, 8)])
def test_plateau_counts_doublings_in_a_row_below_the_best_and_a_new_best_starts_over(doublings, last, best):
    # A one-doubling dip at 4, the best at 8; 32 is above 16 but still below the best: it counts.
    rates = {1: 100, 2: 200, 4: 150, 8: 300, 16: 250, 32: 260, 64: 200, 128: 100}
    calls: list[int] = []
    out = search_max_batch(rate_curve(rates, calls=calls), max_batch=1024, plateau_doublings=doublings)
    assert calls[-1] == last and out.best.batch == best and out.stop_rule is StopRule.PLATEAU


def test_to_oom_turns_the_plateau_rule_off_and_grows_to_the_failure_then_bisects():
    calls: list[int] = []
    out = search_max_batch(rate_curve(PEAK_AT_8, limit=40, calls=calls), max_batch=1024, to_oom=True)
    assert calls[:7] == [1, 2, 4, 8, 16, 32, 64] and calls[7:] == [48, 40, 44, 42, 41]
    assert out.stop_rule is StopRule.OOM and out.limit_found and (out.max_batch, out.first_failure) == (40, 41)
    assert out.best.batch == 8  # the best rate stays where it was, apart from the largest batch that fits


def test_a_flat_rate_is_a_plateau_too_larger_batches_only_cost_time():
    out = search_max_batch(rate_curve({1: 500}), max_batch=1024)
    assert [t.batch for t in out.tries] == [1, 2, 4] and out.best.batch == 1
    assert out.stop_rule is StopRule.PLATEAU


# -- the time budget -----------------------------------------------------------------------------------


def test_a_try_that_would_not_end_within_the_budget_is_not_started():
    clock, calls = FakeClock(), []
    # A pass at batch b takes 0.5 + 0.1 b s, a try 5 passes: 1, 2, ... 32 end at 3, 6.5, 11, 17.5, 28, 46.5 s.
    out = search_max_batch(slow_passes(clock, calls), max_batch=1024, time_budget_s=60, clock=clock)
    assert calls == [1, 2, 4, 8, 16, 32]  # 64, estimated at 2 x 18.5 s = 37 s, does not fit in 13.5 s
    assert out.stop_rule is StopRule.TIME_BUDGET and out.max_batch == 32 and not out.limit_found
    assert out.stop_reason.startswith("stopped growing at batch 32: batch 64 would take about 37 s")
    assert "of the 60 s time budget" in out.stop_reason
    assert [t.seconds for t in out.tries] == pytest.approx([3.0, 3.5, 4.5, 6.5, 10.5, 18.5])  # 46.5 s in all


def test_the_budget_keeps_time_back_for_the_measurement_after_the_search():
    clock, calls = FakeClock(), []
    out = search_max_batch(slow_passes(clock, calls), max_batch=1024, time_budget_s=60, reserve_factor=1.0,
                           clock=clock)
    assert calls == [1, 2, 4, 8, 16]  # 32: 2 x 2 x 10.5 s = 42 s with its measurement, 32 s left
    assert out.stop_rule is StopRule.TIME_BUDGET


def test_a_budget_spent_by_one_try_stops_the_next():
    clock, calls = FakeClock(), []
    out = search_max_batch(slow_passes(clock, calls, pass_s=lambda b: 2.0), time_budget_s=5, clock=clock)
    assert calls == [1] and out.max_batch == 1  # the first try always runs
    assert out.stop_reason == "stopped growing at batch 1: the 5 s time budget was spent"


def test_the_budget_stops_a_bisection_and_the_limit_is_not_claimed():
    clock, calls = FakeClock(), []
    out = search_max_batch(slow_passes(clock, calls, limit=13, pass_s=lambda b: 1.0), time_budget_s=30,
                           clock=clock)
    # 1, 2, 4, 8 end at 20 s; 16 fails at once; 12 (about 7.5 s) ends at 25 s; 14 (about 5.8 s) is not run.
    assert calls == [1, 2, 4, 8, 16, 12]
    assert out.stop_rule is StopRule.TIME_BUDGET and not out.limit_found
    assert (out.max_batch, out.first_failure) == (12, 16)
    assert "bisection stopped between 12 (fits) and 16 (does not)" in out.stop_reason


@pytest.mark.parametrize("bad", [0, -1, float("inf"), float("nan")])
def test_a_time_budget_must_be_a_positive_finite_number(bad):
    with pytest.raises(TorchperfError, match="time budget"):
        search_max_batch(oom_above(4), time_budget_s=bad)


def test_batch_one_not_fitting_gives_zero():
    out = search_max_batch(oom_above(0), max_batch=64)
    assert out.max_batch == 0 and len(out.tries) == 1 and not out.tries[0].fits


def test_resolution_trades_exactness_for_fewer_tries():
    calls: list[int] = []
    out = search_max_batch(oom_above(700, calls), max_batch=4096, resolution=64)
    assert 700 - 64 <= out.max_batch <= 700
    assert len(calls) < len(search_max_batch(oom_above(700), max_batch=4096).tries)


def test_errors_other_than_out_of_memory_propagate():
    def broken(batch, warmup, iters):
        raise ValueError("mat1 and mat2 shapes cannot be multiplied")
    with pytest.raises(ValueError):
        search_max_batch(broken)



def test_cancel_between_tries_keeps_what_was_found():
    calls: list[int] = []
    out = search_max_batch(oom_above(10**6, calls), max_batch=1024, should_cancel=lambda: len(calls) >= 3)
    assert out.cancelled and calls == [1, 2, 4] and out.max_batch == 4
    # where the cancel found the search, not the rule's name again ("stopped by cancelled: cancelled" was a defect)
    assert out.stop_reason == "cancelled while growing, before batch 8"
    calls.clear()
    out = search_max_batch(oom_above(10, calls), max_batch=1024, should_cancel=lambda: len(calls) >= 6)
    assert out.cancelled and calls == [1, 2, 4, 8, 16, 12] and out.max_batch == 8
    assert out.stop_reason == "cancelled while bisecting between 8 (fits) and 12 (does not)"


def test_release_runs_after_each_failed_try_and_once_at_the_end():
    released: list[int] = []
    calls: list[int] = []
    search_max_batch(oom_above(5, calls), max_batch=64, release=lambda: released.append(len(calls)))
    assert calls == [1, 2, 4, 8, 6, 5]
    assert released == [4, 5, 6]  # after 8 and 6 failed, then at the end


def test_out_of_memory_is_told_without_torch():
    assert is_out_of_memory(OutOfMemory(16))
    assert is_out_of_memory(MemoryError())
    assert is_out_of_memory(MemoryCapExceeded("over the cap"))
    assert is_out_of_memory(RuntimeError("DefaultCPUAllocator: can't allocate memory: you tried..."))
    assert not is_out_of_memory(RuntimeError("Given groups=1, weight of size [8, 3, 3, 3]"))
    assert not is_out_of_memory(ValueError("out of memory"))  # only the kinds an allocation failure raises


def test_the_search_runs_without_importing_torch():
    code = ("import sys; from torchperf_tui.engine.measurements.batch_search import search_max_batch; "
            "from tests.fakes.fake_tries import oom_above; "
            "out = search_max_batch(oom_above(12)); "
            "print(out.max_batch, 'torch' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          cwd=str(Path(__file__).resolve().parents[2]))
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["12", "False"]
