"""Run records: made from a timing run with its set-up, stats, samples and flags; the history modules load
without torch."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.records import ENV
from torchperf_tui.engine.measurements.flags import Flags
from torchperf_tui.engine.records.history_records import record_from_timing
from torchperf_tui.core.stats import compute_stats
from torchperf_tui.engine.measurements.timing import TimingResult
from torchperf_tui.wording.history import history_line


def test_record_from_timing_keeps_setup_stats_samples_and_flags():
    flags = Flags(cudnn_benchmark=True, num_threads=2)
    samples = [4.0, 5.0, 6.0, 5.0]
    result = TimingResult(model="resnet18", device="cpu", input_shape=(2, 3, 32, 32), dtype="float32",
                          channels_last=True, flags=flags, first_iter_ms=40.0, warmup_ms=[5.0, 5.0],
                          samples_ms=samples, stats=compute_stats(samples, batch=2, first_iter_ms=40.0),
                          cancelled=False, started_at=1_800_000_000.0, duration_s=2.0, timer="perf_counter")
    record = record_from_timing(result, fingerprint=ENV)
    assert (record.kind, record.model, record.input_shape, record.dtype, record.channels_last, record.device) == \
        ("timing", "resnet18", (2, 3, 32, 32), "float32", True, "cpu")
    assert record.flags == flags.to_dict() and record.flags_text == flags.describe("cpu")
    assert record.samples_ms == samples and record.fingerprint == ENV
    assert record.stats.p50_ms == 5.0 and record.stats.first_iter_ms == 40.0 and record.stats.n == 4
    assert record.stats.fps == pytest.approx(2 * 1000 / 5.0)
    assert record.created_at == "2027-01-15T08:00:02+00:00"  # started_at + duration, in UTC
    assert record.details["warmup_iters"] == 2
    assert "p50 5.00 ms" in history_line(record) and "threads=2" in history_line(record)


def test_the_summary_line_gives_the_rate_at_its_p50_not_the_means():
    # Seen on an H100: "p50 6.07 ms ... 5,053.5/s" for a batch of 32, where 32 / 6.07 ms is 5,272/s.
    samples = [4.0, 4.0, 4.0, 4.0, 24.0]  # median 4 ms, mean 8 ms: a slow tail
    result = TimingResult(model="resnet18", device="cpu", input_shape=(2, 3, 32, 32), dtype="float32",
                          channels_last=False, flags=Flags(), first_iter_ms=40.0, warmup_ms=[], samples_ms=samples,
                          stats=compute_stats(samples, batch=2, first_iter_ms=40.0), cancelled=False,
                          started_at=1_800_000_000.0, duration_s=1.0, timer="perf_counter")
    line = history_line(record_from_timing(result, fingerprint=ENV))
    assert "p50 4.00 ms" in line and "500.0/s at p50" in line and "250.0" not in line


@pytest.mark.parametrize("module", ["history_records", "history_file", "history_compare", "export", "fingerprint"])
def test_history_modules_do_not_import_torch(module):
    # `history` and `export` must not pay for torch; only environment_fingerprint() does, through the probe.
    code = f"import sys, torchperf_tui.engine.records.{module}; sys.exit('torch' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code]).returncode == 0


def test_a_history_line_marks_the_percentiles_its_samples_cannot_support():
    import dataclasses

    from tests.records import make_record

    few = make_record(10.0, 20.0)  # 3 samples: not enough for p50 (9) nor p99 (555)
    assert "p50 10.00 ms?  p99 20.00 ms?" in history_line(few)
    some = make_record(10.0, 20.0)
    some.stats = dataclasses.replace(some.stats, n=64)
    assert "p50 10.00 ms  p99 20.00 ms?" in history_line(some)
    many = make_record(10.0, 20.0)
    many.stats = dataclasses.replace(many.stats, n=600)
    assert "p50 10.00 ms  p99 20.00 ms " in history_line(many) + " "


def test_a_record_names_the_models_source_overrides_sequence_length_and_inputs():
    samples = [4.0, 5.0]
    result = TimingResult(model="hf:gpt2", device="cpu", input_shape=(2, 64), dtype="float32", channels_last=False,
                          flags=Flags(), first_iter_ms=9.0, warmup_ms=[], samples_ms=samples,
                          stats=compute_stats(samples, batch=2), cancelled=False, started_at=1_800_000_000.0,
                          duration_s=1.0, timer="perf_counter", model_args="n_layer=2", seq_len=64,
                          inputs="input_ids 2x64 int64 (ids < 50,257)")
    record = record_from_timing(result, fingerprint=ENV)
    assert record.details["source"] == "hf" and record.details["model_args"] == "n_layer=2"
    assert record.details["seq_len"] == 64 and record.details["inputs"].startswith("input_ids 2x64")
    assert record.setup()["model_args"] == "n_layer=2" and record.setup()["seq_len"] == 64
    assert "hf:gpt2 (n_layer=2)" in history_line(record)
    plain = record_from_timing(TimingResult(model="resnet18", device="cpu", input_shape=(1, 3, 8, 8), dtype="float32",
                                            channels_last=False, flags=Flags(), first_iter_ms=1.0, warmup_ms=[],
                                            samples_ms=samples, stats=compute_stats(samples, batch=1),
                                            cancelled=False, started_at=1.0, duration_s=1.0, timer="perf_counter"),
                               fingerprint=ENV)
    assert plain.details["source"] == "torchvision" and "model_args" not in plain.details


def test_a_timing_runs_record_keeps_the_config_it_ran_and_a_gate_measures_that_again():
    from torchperf_tui.engine.measurements.bench_config import BenchConfig
    from torchperf_tui.engine.measurements.timing import run_benchmark
    from torchperf_tui.engine.records.baseline import config_of_record

    cfg = BenchConfig(model="tests.tinymodels:tiny_cnn", input_shape=(1, 3, 16, 16), device="cpu", warmup="auto",
                      iters=6, shapes="random:8-16", seed=3, flags=Flags(num_threads=1))
    result = run_benchmark(cfg)
    record = record_from_timing(result, fingerprint=ENV)
    assert record.config == result.config.to_record()
    assert (record.config["seed"], record.config["warmup"], record.config["shapes"]) == (3, "auto", "random:8-16")
    again = config_of_record(record)
    assert (again.seed, again.warmup, again.shapes, again.input_shape, again.flags.num_threads) == \
        (3, "auto", "random:8-16", (1, 3, 16, 16), 1)
