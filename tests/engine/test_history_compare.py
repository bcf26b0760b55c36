"""Comparing two runs: median and p99 ratios, what differs between them, and runs that cannot be compared."""

from __future__ import annotations

import pytest

from tests.records import ENV, make_record
from torchperf_tui.core.errors import TorchperfError
from torchperf_tui.engine.measurements.flags import Flags
from torchperf_tui.engine.records.history_compare import compare_records
from torchperf_tui.wording.history import history_line


def test_compare_reports_median_and_p99_ratios_and_flag_changes():
    baseline = make_record(10.0, 20.0)
    candidate = make_record(8.0, 15.0, flags=Flags(cudnn_benchmark=True).to_dict(),
                            env={**ENV, "driver": "560.1"})
    cmp = compare_records(baseline, candidate)
    assert cmp.median_ratio == pytest.approx(0.8)
    assert cmp.speedup_pct == pytest.approx(25.0)
    assert cmp.p99_ratio == pytest.approx(0.75)
    assert cmp.flags_diff == {"cudnn_benchmark": (False, True)}
    assert cmp.setup_diff == {}  # another driver is not another set-up
    summary = cmp.summary()
    assert "1.25x as fast" in summary and "p50 10.00 ms -> 8.00 ms" in summary and "speed-up +25.0 %" in summary
    assert "p99 ratio 0.75" in summary and "cudnn_benchmark off->on" in summary
    assert "not like for like" not in summary


def test_compare_flags_runs_that_are_not_like_for_like():
    cmp = compare_records(make_record(10.0), make_record(20.0, dtype="float16"))
    assert cmp.setup_diff == {"dtype": ("float32", "float16")}
    assert cmp.speedup_pct == pytest.approx(-50.0)
    assert "2.00x as slow" in cmp.summary() and "not like for like: dtype" in cmp.summary()


def test_compare_refuses_a_run_without_samples():
    empty = make_record()
    empty.stats = None
    with pytest.raises(TorchperfError, match="no timed samples"):
        compare_records(make_record(), empty)


def test_a_run_whose_gpu_throttled_is_marked_and_its_comparison_says_the_clocks_may_explain_it():
    hot_env = {**ENV, "gpu_throttled": True, "gpu_throttled_share": 0.4, "gpu_throttle_reasons": "power cap (software)"}
    cool_env = {**ENV, "gpu_throttled": False, "gpu_throttled_share": 0.0, "gpu_throttle_reasons": ""}
    hot, cool = make_record(12.0, env=hot_env), make_record(10.0, env=cool_env)
    assert hot.throttle_text() == "throttled 40 %: power cap (software)" and cool.throttle_text() == ""
    assert history_line(hot).endswith("[GPU throttled 40 %: power cap (software)]")
    note = compare_records(cool, hot).clock_note
    assert note == (f"{hot.short_id}'s GPU throttled 40 %: power cap (software), {cool.short_id}'s did not: part of "
                    "the ratio may be the clocks, not what differs between the runs")
    assert note in compare_records(cool, hot).summary()
    assert compare_records(hot, make_record(11.0, env=hot_env)).clock_note is None  # both throttled alike
    assert compare_records(cool, make_record(11.0)).clock_note is None  # a CPU run, or before this was kept


def test_a_throttle_reason_read_from_a_file_cannot_carry_escape_sequences():
    record = make_record(env={**ENV, "gpu_throttled": True, "gpu_throttled_share": "lots",
                              "gpu_throttle_reasons": "\x1b[2Jpower cap"})
    assert record.throttle_text() == "throttled: \\x1b[2Jpower cap"  # the ESC written out, not sent
