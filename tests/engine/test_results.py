"""Run records, the JSON-lines history (durability, corrupt lines), comparisons and exports; all on CPU."""

from __future__ import annotations

import csv
import dataclasses
import io
import json
import re
import subprocess
import sys

import pytest

from torchperf_tui.engine import results
from torchperf_tui.engine.device import CpuFacts, DeviceReport, GpuFacts
from torchperf_tui.engine.errors import TorchperfError
from torchperf_tui.engine.flags import Flags
from torchperf_tui.engine.nvml import NA
from torchperf_tui.engine.results import (HISTORY_ENV, History, RunRecord, compare_records, export_records,
                                          fingerprint, record_from_timing)
from torchperf_tui.engine.stats import TimingStats, compute_stats
from torchperf_tui.engine.timing import TimingResult

ENV = {"device_name": "NVIDIA H100 80GB HBM3", "driver": "550.54.15", "torch": "2.14.1", "cuda_runtime": "12.8",
       "cudnn": "9.13.0", "hostname": "box", "python": "3.11.9"}


def make_record(p50: float = 10.0, p99: float = 20.0, *, flags: dict | None = None, dtype: str = "float32",
                model: str = "resnet18", env: dict | None = None, record_id: str | None = None) -> RunRecord:
    """A synthetic record whose stats are given outright, so comparisons have known answers."""
    stats = TimingStats(n=3, mean_ms=p50 + 1, std_ms=0.5, min_ms=p50 - 1, max_ms=p99, p50_ms=p50, p90_ms=p50 + 2,
                        p99_ms=p99, iqr_ms=1.0, fps=1000.0 / (p50 + 1), first_iter_ms=120.0)
    return RunRecord(id=record_id or results.new_record_id(), kind="timing", created_at="2026-11-22T20:30:00+00:00",
                     model=model, input_shape=(1, 3, 224, 224), dtype=dtype, channels_last=False, device="cuda:0",
                     flags=flags if flags is not None else Flags().to_dict(), flags_text="defaults",
                     stats=stats, samples_ms=[p50 - 1, p50, p99], fingerprint=dict(env or ENV),
                     duration_s=1.5, timer="cuda-events", details={"compile_mode": None})


# --------------------------------------------------------------------------------------------------
# The history file


def test_history_round_trips_records_in_order(tmp_path):
    history = History(tmp_path / "h.jsonl")
    first, second = make_record(10.0), make_record(8.0, flags=Flags(cudnn_benchmark=True).to_dict())
    history.append(first)
    history.append(second)
    loaded = history.load()
    assert loaded.warnings == []
    assert loaded.records == [first, second]
    assert loaded.last(1) == [second] and loaded.last(None) == [first, second] and loaded.last(0) == []
    # one line per record, each a JSON object
    lines = (tmp_path / "h.jsonl").read_text().splitlines()
    assert len(lines) == 2 and all(json.loads(line)["kind"] == "timing" for line in lines)


def test_append_is_visible_to_another_reader_at_once_and_fsyncs_each_record(tmp_path, monkeypatch):
    synced = []
    real_fsync = results.os.fsync
    monkeypatch.setattr(results.os, "fsync", lambda fd: (synced.append(fd), real_fsync(fd)))
    path = tmp_path / "deep" / "dir" / "history.jsonl"  # parent folders are made on first append
    writer = History(path)
    record = make_record()
    writer.append(record)
    # a second History on the same path (another process, the TUI's history pane) sees it without any close
    assert History(path).load().records == [record]
    assert len(synced) >= 1
    writer.append(make_record())
    assert len(History(path).load().records) == 2


def test_missing_history_is_empty_without_warnings(tmp_path):
    loaded = History(tmp_path / "none.jsonl").load()
    assert loaded.records == [] and loaded.warnings == []


def test_corrupt_lines_are_skipped_counted_and_summed_up_in_one_warning(tmp_path):
    path = tmp_path / "h.jsonl"
    good1, good2 = make_record(), make_record()
    torn = json.dumps(make_record().to_dict())[:57]  # what a kill in the middle of a write leaves
    path.write_text("\n".join([
        json.dumps(good1.to_dict()),
        "this is not json",
        "[1, 2, 3]",
        '"a string"',
        json.dumps({"id": "abc", "kind": "timing"}),  # an object, but not a record
        "",  # blank lines are not records and not worth a warning
        json.dumps(good2.to_dict()),
        torn,
    ]))
    loaded = History(path).load()
    assert loaded.records == [good1, good2]
    assert loaded.skipped == 5
    # one line for all of them, naming the first few by line number
    assert loaded.warnings == [f"{path}: skipped 5 bad lines (line 2: not valid JSON (Expecting value); "
                               "line 3: a JSON array, not a record object; line 4: a JSON string, not a record "
                               "object; and 2 more)"]


@pytest.mark.parametrize("line, problem", [
    ("this is not json", "not valid JSON"),
    ("[1, 2, 3]", "a JSON array, not a record object"),
    ('"a string"', "a JSON string, not a record object"),
    (json.dumps({"id": "abc", "kind": "timing"}), "lacks created_at"),
])
def test_a_single_bad_line_is_named_by_its_line_number(tmp_path, line, problem):
    path = tmp_path / "h.jsonl"
    good = make_record()
    path.write_text(json.dumps(good.to_dict()) + "\n" + line + "\n")
    loaded = History(path).load()
    assert loaded.records == [good] and loaded.skipped == 1
    assert len(loaded.warnings) == 1 and loaded.warnings[0].startswith(f"{path}:2: skipped: ")
    assert problem in loaded.warnings[0]


def test_a_torn_last_line_is_called_so(tmp_path):
    path = tmp_path / "h.jsonl"
    good = make_record()
    path.write_text(json.dumps(good.to_dict()) + "\n" + json.dumps(make_record().to_dict())[:57])
    for loaded in (History(path).load(), History(path).load(last=5)):
        assert loaded.records == [good]
        assert loaded.warnings[0].startswith(f"{path}:2: skipped: truncated last line, a write interrupted by a "
                                             "kill or crash")


def test_append_after_a_torn_line_starts_a_fresh_line(tmp_path):
    path = tmp_path / "h.jsonl"
    kept = make_record()
    path.write_text(json.dumps(kept.to_dict()) + "\n" + json.dumps(make_record().to_dict())[:40])
    new = make_record()
    History(path).append(new)
    loaded = History(path).load()
    # only the torn record is lost, not the new one glued onto it
    assert loaded.records == [kept, new]
    assert len(loaded.warnings) == 1 and ":2:" in loaded.warnings[0]


def test_history_path_argument_then_env_var_then_user_data_dir(tmp_path, monkeypatch):
    monkeypatch.setenv(HISTORY_ENV, str(tmp_path / "from_env.jsonl"))
    assert History().path == tmp_path / "from_env.jsonl"
    assert History(tmp_path / "explicit.jsonl").path == tmp_path / "explicit.jsonl"
    History().append(make_record())
    assert (tmp_path / "from_env.jsonl").exists()
    monkeypatch.delenv(HISTORY_ENV)
    default = History().path
    assert default.name == "history.jsonl" and "torchperf-tui" in str(default)


def test_non_finite_numbers_are_written_as_strict_json(tmp_path):
    record = make_record()
    record.stats = dataclasses.replace(record.stats, fps=float("inf"))
    path = tmp_path / "h.jsonl"
    History(path).append(record)
    # parse_constant rejects Infinity/NaN, as JavaScript's and jq's parsers do
    data = json.loads(path.read_text(), parse_constant=lambda c: pytest.fail(f"{c} in JSON"))
    assert data["stats"]["fps"] is None
    assert History(path).load().records[0].stats.fps is None


def test_find_by_id_prefix(tmp_path):
    a, b = make_record(record_id="abc123000000"), make_record(record_id="abd456000000")
    loaded = results.LoadResult([a, b], [])
    assert loaded.find("abc") is a and loaded.find("abd456000000") is b
    with pytest.raises(TorchperfError, match="2 runs"):
        loaded.find("ab")
    with pytest.raises(TorchperfError, match="no run"):
        loaded.find("zz")


# Two lines as the writer before the one statistics type (RunStats) wrote them: a run, and one whose fps was
# not finite and whose first iteration was not kept.
OLD_LINES = [
    '{"id":"0a1b2c3d4e5f","kind":"timing","created_at":"2026-11-22T20:30:00+00:00","model":"resnet18",'
    '"input_shape":[2,3,32,32],"dtype":"float32","channels_last":false,"device":"cpu","flags":{"cudnn_benchmark":'
    'null,"num_threads":2},"flags_text":"threads=2","stats":{"n":3,"mean_ms":5.0,"std_ms":1.0,"min_ms":4.0,'
    '"max_ms":6.0,"p50_ms":5.0,"p90_ms":5.8,"p99_ms":5.98,"iqr_ms":1.0,"fps":400.0,"first_iter_ms":40.0},'
    '"samples_ms":[4.0,5.0,6.0],"fingerprint":{"device_name":"Test CPU","torch":"2.9.0"},"cancelled":false,'
    '"duration_s":1.5,"timer":"perf_counter","details":{"warmup_iters":2,"compile_mode":null},"schema":1}',
    '{"id":"ffeeddccbbaa","kind":"timing","created_at":"2026-11-22T20:30:00+00:00","model":"resnet18",'
    '"input_shape":[2,3,32,32],"dtype":"float32","channels_last":false,"device":"cpu","flags":{"cudnn_benchmark":'
    'null,"num_threads":2},"flags_text":"threads=2","stats":{"n":3,"mean_ms":5.0,"std_ms":1.0,"min_ms":4.0,'
    '"max_ms":6.0,"p50_ms":5.0,"p90_ms":5.8,"p99_ms":5.98,"iqr_ms":1.0,"fps":null,"first_iter_ms":null},'
    '"samples_ms":[4.0,5.0,6.0],"fingerprint":{"device_name":"Test CPU","torch":"2.9.0"},"cancelled":false,'
    '"duration_s":1.5,"timer":"perf_counter","details":{"warmup_iters":2,"compile_mode":null},"schema":1}',
]


def test_a_history_written_before_the_one_stats_type_loads_and_writes_back_the_same(tmp_path):
    path = tmp_path / "old.jsonl"
    path.write_text("\n".join(OLD_LINES) + "\n")
    loaded = History(path).load()
    assert loaded.warnings == [] and [r.id for r in loaded.records] == ["0a1b2c3d4e5f", "ffeeddccbbaa"]
    run, no_fps = loaded.records
    assert isinstance(run.stats, TimingStats) and run.stats.fps == 400.0 and run.stats.first_iter_ms == 40.0
    assert no_fps.stats.fps is None and no_fps.stats.first_iter_ms is None
    assert "400.0/s" in run.summary() and "/s" not in no_fps.summary().split("flags:")[0]
    for record, line in zip(loaded.records, OLD_LINES):
        assert json.dumps(record.to_dict(), separators=(",", ":")) == line


# --------------------------------------------------------------------------------------------------
# Records from timing results, and the fingerprint


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
    assert "p50 5.00 ms" in record.summary() and "threads=2" in record.summary()


def _report(gpu_names: list[str], cuda: bool = True) -> DeviceReport:
    na = NA("not probed in this test")
    gpus = [GpuFacts(i, name, "9.0", 132, na, na, na, na, na, na, na, na, na, na, {}) for i, name in
            enumerate(gpu_names)]
    cpu = CpuFacts("Test CPU 9000", 8, 16, na, na, 4, True)
    return DeviceReport(torch_version="2.14.1", cuda_available=cuda, cuda_reason=None, cuda_runtime="12.8",
                        cudnn_version=NA("cuDNN not available"), driver_version="550.54.15",
                        nvml_available=True, nvml_reason=None, gpus=gpus, cpu=cpu)


def test_fingerprint_names_the_device_the_run_used():
    report = _report(["GPU zero", "GPU one"])
    assert fingerprint(report, device="cuda:1")["device_name"] == "GPU one"
    assert fingerprint(report, device="cuda")["device_name"] == "GPU zero"
    assert fingerprint(report)["device_name"] == "GPU zero"
    cpu = fingerprint(report, device="cpu")
    assert cpu["device_name"] == "Test CPU 9000" and cpu["compute_capability"] is None
    assert cpu["driver"] == "550.54.15" and cpu["torch"] == "2.14.1" and cpu["cuda_runtime"] == "12.8"
    assert cpu["cudnn"] == "n/a (cuDNN not available)"
    for key in ("hostname", "python", "cpu", "torchvision", "gpu_count"):
        assert key in cpu
    json.dumps(cpu)  # flat and JSON-able


def test_fingerprint_probes_the_device_once(monkeypatch):
    from torchperf_tui.engine import device

    calls = []
    monkeypatch.setattr(device, "probe_device", lambda: calls.append(1) or _report([], cuda=False))
    results.clear_fingerprint_cache()
    try:
        assert fingerprint()["device_name"] == "Test CPU 9000"
        fingerprint(device="cpu")
        assert len(calls) == 1
    finally:
        results.clear_fingerprint_cache()


def test_results_module_does_not_import_torch():
    # `history` and `export` must not pay for torch; only fingerprint() does, through the probe.
    code = "import sys, torchperf_tui.engine.results; sys.exit('torch' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code]).returncode == 0


# --------------------------------------------------------------------------------------------------
# Comparisons


def test_compare_reports_median_and_p99_ratios_and_flag_changes():
    baseline = make_record(10.0, 20.0)
    candidate = make_record(8.0, 15.0, flags=Flags(cudnn_benchmark=True).to_dict(),
                            env={**ENV, "driver": "560.1"})
    cmp = compare_records(baseline, candidate)
    assert cmp.median_ratio == pytest.approx(0.8)
    assert cmp.speedup_pct == pytest.approx(25.0)
    assert cmp.latency_change_pct == pytest.approx(-20.0)
    assert cmp.p99_ratio == pytest.approx(0.75)
    assert cmp.mean_ratio == pytest.approx(9.0 / 11.0)
    assert cmp.flags_diff == {"cudnn_benchmark": (False, True)}
    assert cmp.environment_diff == {"driver": ("550.54.15", "560.1")}
    assert cmp.like_for_like and cmp.setup_diff == {}
    assert "1.25x as fast" in cmp.summary() and "cudnn_benchmark off->on" in cmp.summary()
    assert results.Comparison.from_dict(json.loads(json.dumps(cmp.to_dict()))) == cmp


def test_compare_flags_runs_that_are_not_like_for_like():
    cmp = compare_records(make_record(10.0), make_record(20.0, dtype="float16"))
    assert cmp.setup_diff == {"dtype": ("float32", "float16")} and not cmp.like_for_like
    assert cmp.speedup_pct == pytest.approx(-50.0)
    assert "2.00x as slow" in cmp.summary() and "not like for like" in cmp.summary()


def test_compare_refuses_a_run_without_samples():
    empty = make_record()
    empty.stats = None
    with pytest.raises(TorchperfError, match="no timed samples"):
        compare_records(make_record(), empty)


# --------------------------------------------------------------------------------------------------
# Exports


def test_export_json_parses_back_to_the_records():
    records = [make_record(10.0), make_record(8.0)]
    data = json.loads(export_records(records, "json"))
    assert [RunRecord.from_dict(d) for d in data] == records


def test_export_csv_has_one_row_per_run_with_flattened_flags_and_stats():
    records = [make_record(10.0), make_record(8.0, flags=Flags(cudnn_benchmark=True).to_dict())]
    rows = list(csv.DictReader(io.StringIO(export_records(records, "csv"))))
    assert len(rows) == 2
    assert [float(r["p50_ms"]) for r in rows] == [10.0, 8.0]
    assert [r["flag.cudnn_benchmark"] for r in rows] == ["False", "True"]
    assert rows[0]["flag.num_threads"] == ""  # None: left as it was
    assert rows[0]["env.driver"] == "550.54.15" and rows[0]["input_shape"] == "1x3x224x224"
    assert rows[0]["id"] == records[0].id and float(rows[1]["fps"]) == pytest.approx(1000 / 9)
    assert "samples_ms" not in rows[0]


def test_export_md_is_a_table_with_a_header_row():
    records = [make_record(10.0, model="my|model"), make_record(8.0)]
    lines = export_records(records, "md").splitlines()
    assert lines[0].startswith("| When (UTC) | ID | Model |") and "p50" in lines[0]
    assert set(lines[1].replace("|", "")) == {"-"}
    assert len(lines) == 4
    header_cells = lines[0].count(" | ")
    assert all(line.replace("\\|", "").count(" | ") == header_cells for line in lines[2:])
    assert "my\\|model" in lines[2] and "10.00 ms" in lines[2]


def test_export_unknown_format_is_a_one_line_error():
    with pytest.raises(TorchperfError, match="choose one of json, csv, md"):
        export_records([make_record()], "xlsx")
