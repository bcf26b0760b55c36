"""A baseline is input: its settings go through the checks the same values typed as options go through, each bad
one refused in one line naming the record; and a run marked disturbed that reads slower past the limit is not
judged (exit 0), as nvbench says "cannot tell" instead of failing a build for noise. Crafted records, no torch."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from tests.records import make_record
from torchperf_tui.core import options
from torchperf_tui.engine.records import baseline_gate
from torchperf_tui.engine.records.baseline import BaselineError, config_of_record
from torchperf_tui.engine.records.baseline_gate import gate
from torchperf_tui.engine.records.history_records import HistoryRecord
from torchperf_tui.wording.baseline import gate_lines

NOISY_HOST = "noisy host: load 6.1 on 2 cores, other processes busy on 1.8 of them"


def timing(samples, **changes) -> HistoryRecord:
    record = make_record(p50=float(np.median(samples)))
    return dataclasses.replace(record, **{"device": "cpu", "samples_ms": [float(s) for s in samples], **changes})


def noisy(median: float, n: int = 64, seed: int = 0) -> list[float]:
    rng = np.random.default_rng(seed)
    return list(median * (1 + np.abs(rng.normal(0, 0.03, n))))


def with_flag(name, value) -> HistoryRecord:
    base = timing(noisy(10.0))
    return dataclasses.replace(base, flags={**base.flags, name: value})


def with_detail(name, value) -> HistoryRecord:
    base = timing(noisy(10.0))
    return dataclasses.replace(base, details={**base.details, name: value})


# -- the record's settings, checked as typed options are


@pytest.mark.parametrize("record, said", [
    (with_flag("num_threads", options.cpu_count() + 1), f"threads={options.cpu_count() + 1}: this machine gives"),
    (with_flag("num_threads", 999), "threads=999: this machine gives the process"),
    (with_flag("num_threads", 0), "threads: must be at least 1, got 0"),
    (with_flag("num_threads", -1), "threads: must be at least 1, got -1"),
    (with_flag("num_threads", "x"), "threads: expected a whole number, got 'x'"),
    (with_flag("num_threads", 1.5), "threads: expected a whole number, got '1.5'"),
    (with_flag("num_threads", True), "threads: expected a whole number, got 'true'"),
    (with_flag("cudnn_benchmark", "yes"), 'flag cudnn_benchmark is "yes", not true or false'),
    (with_flag("sdpa", "warp"), "sdpa: unknown backend 'warp'"),
    (with_flag("matmul_precision", "ultra"), "matmul precision 'ultra'"),
    (with_detail("warmup_iters", 10**12), "warm-up: expected a count 0-10,000 or 'auto', got '1000000000000'"),
    (with_detail("warmup_iters", -1), "warm-up: expected a count 0-10,000 or 'auto', got '-1'"),
    (timing(noisy(10.0, n=options.ITERS_MAX + 1)), f"iterations (its samples): must be at most {options.ITERS_MAX:,}"),
    (timing(noisy(10.0), dtype="float128"), "unknown dtype 'float128'"),
    (timing(noisy(10.0), device="tpu:0"), "unknown device 'tpu:0'"),
    (with_detail("step", "fly"), "unknown step 'fly'"),
    (with_detail("optimizer", "lion"), "unknown optimizer 'lion'"),
    (with_detail("amp", "fp8"), "unknown mixed precision 'fp8'"),
    (with_detail("shapes", "random:0-99999999"), "random size range '0-99999999'"),
], ids=["threads-past-cpus", "threads-999", "threads-0", "threads-minus-1", "threads-x", "threads-1.5",
        "threads-true", "bool-flag-yes", "sdpa", "matmul", "warmup-1e12", "warmup-minus-1", "iters-past-max",
        "float128", "tpu", "step", "optimizer", "amp", "shapes"])
def test_a_bad_setting_in_the_record_is_one_line_naming_the_record(record, said):
    with pytest.raises(BaselineError) as caught:
        config_of_record(record, source="base.json")
    message = str(caught.value)
    assert message.startswith(f"the baseline {record.short_id} (base.json): ") and said in message
    assert "\n" not in message


def test_more_threads_than_this_machine_has_says_how_to_measure_it_here():
    record = with_flag("num_threads", options.cpu_count() + 1)
    with pytest.raises(BaselineError, match=r"choose 1-\d+ \(--threads N measures it with N threads here"):
        config_of_record(record)
    # Typed on the command line, the count replaces the record's, which is then neither applied nor refused.
    assert config_of_record(record, threads_given=True).flags.num_threads is None


def test_good_settings_pass_as_they_are():
    assert config_of_record(with_flag("num_threads", None)).flags.num_threads is None  # the process's own count
    assert config_of_record(with_flag("num_threads", 1)).flags.num_threads == 1
    assert config_of_record(with_detail("warmup_iters", "auto")).warmup == "auto"
    assert config_of_record(timing(noisy(10.0))).warmup == 10  # a record without a warm-up count: bench's default
    assert config_of_record(with_flag("sdpa", "math+flash")).flags.sdpa == "flash+math"


# -- a disturbed run is not judged


def test_a_disturbed_run_slower_past_the_limit_is_not_judged_and_exits_0():
    baseline = timing(noisy(10.0, seed=1))
    now = timing(noisy(11.5, seed=2), disturbed=[NOISY_HOST])
    verdict = gate(baseline, now, fail_if_slower_pct=10)
    assert (verdict.verdict, verdict.failed, verdict.not_judged, verdict.exit_code) == ("slower", False, True, 0)
    assert verdict.disturbed == [NOISY_HOST]
    lines = gate_lines(verdict)
    assert lines[1].startswith("gate: disturbed: not judged: ") and "past the allowed 10 %" in lines[1]
    assert lines[1].endswith("measure again on a quiet machine (exit 0)")
    assert any(line.startswith(f"note: {now.short_id} was disturbed ({NOISY_HOST})") for line in lines)
    assert not gate_lines(verdict, exit_code=False)[1].endswith("(exit 0)")  # the app's pane: no exit code
    data = verdict.to_dict()
    assert (data["not_judged"], data["failed"], data["exit_code"]) == (True, False, 0)
    # The same samples without the mark: the gate fails.
    clean = gate(baseline, dataclasses.replace(now, disturbed=[]), fail_if_slower_pct=10)
    assert (clean.failed, clean.not_judged, clean.exit_code) == (True, False, 1)


def test_a_disturbed_run_that_reads_the_same_or_faster_still_passes():
    baseline = timing(noisy(10.0, seed=1))
    for median, word in ((10.0, "same"), (7.0, "faster")):
        verdict = gate(baseline, timing(noisy(median, seed=2), disturbed=[NOISY_HOST]))
        assert (verdict.verdict, verdict.not_judged, verdict.exit_code) == (word, False, 0)
        assert gate_lines(verdict)[1].startswith("gate: passes")


def test_only_the_run_now_decides_a_disturbed_baseline_does_not_stop_a_failure():
    verdict = gate(timing(noisy(10.0, seed=1), disturbed=[NOISY_HOST]), timing(noisy(15.0, seed=2)))
    assert (verdict.failed, verdict.exit_code) == (True, 1)


# -- the bootstrap's memory


def test_the_bootstrap_resamples_in_bounded_batches(monkeypatch):
    """A record may keep up to options.ITERS_MAX samples: resampled 4999 times at once, that was 8 GB."""
    from scipy import stats

    seen = []
    real = stats.bootstrap

    def spy(data, statistic, **kwargs):
        seen.append((max(len(d) for d in data), kwargs.get("batch")))
        return real(data, statistic, **kwargs)

    monkeypatch.setattr(stats, "bootstrap", spy)
    rng = np.random.default_rng(0)
    ratio, low, high, _ = baseline_gate.ratio_test(list(10 + rng.random(20_000)), list(10 + rng.random(20_000)))
    n, batch = seen[0]
    assert batch is not None and batch * n <= baseline_gate.BOOTSTRAP_BATCH_ELEMENTS
    assert low <= ratio <= high
