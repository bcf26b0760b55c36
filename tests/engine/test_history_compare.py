"""Comparing two runs: median and p99 ratios, what differs between them, and runs that cannot be compared."""

from __future__ import annotations

import pytest

from tests.records import ENV, make_record
from torchperf_tui.engine.errors import TorchperfError
from torchperf_tui.engine.flags import Flags
from torchperf_tui.engine.history_compare import compare_records


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
