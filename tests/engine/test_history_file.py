"""The JSON-lines history: records round-trip in order, each append is durable, the path comes from the
argument, $TORCHPERF_HISTORY or the user's data folder, and a history written by an earlier version loads.
The file as untrusted input: only regular files are read, and never waited on; a line's length and nesting
are bounded; every field is checked, and bad lines are skipped, counted and summed up in one warning;
`load(last=n)` reads from the end; an fsync that fails after the write says the run was saved."""

from __future__ import annotations

import dataclasses
import errno
import json
import os
import random
import stat
import subprocess
import sys
import threading
import time
import tracemalloc

import pytest

from tests.records import make_record
from torchperf_tui.engine.records import history_file, history_records
from torchperf_tui.core.errors import TorchperfError
from torchperf_tui.core.options import EXPORT_FORMATS
from torchperf_tui.wording.history_export import export_records
from torchperf_tui.engine.measurements.flags import Flags
from torchperf_tui.engine.records.history_file import HISTORY_ENV, MAX_LINE_BYTES, HistoryFile, HistoryNotDurable, LoadResult
from torchperf_tui.engine.records.history_records import HistoryRecord
from torchperf_tui.core.stats import TimingStats
from torchperf_tui.wording.history import history_line

posix_only = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs POSIX FIFOs and devices")


def line_of(record: HistoryRecord) -> str:
    return json.dumps(record.to_dict())


def in_thread(call, timeout: float = 10.0):
    """`call()` in a daemon thread: (returned value, raised exception); the test fails if it is still
    running after `timeout` (reading a FIFO or /dev/zero waits or reads for ever)."""
    outcome: dict = {}

    def target():
        try:
            outcome["value"] = call()
        except BaseException as exc:  # noqa: BLE001 -- handed back to the test
            outcome["error"] = exc

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(timeout)
    assert not thread.is_alive(), f"still running after {timeout} s"
    return outcome.get("value"), outcome.get("error")


@pytest.fixture
def fifo(tmp_path):
    path = tmp_path / "history.fifo"
    os.mkfifo(path)
    yield path
    # Code that does not refuse FIFOs is stuck in open(), a writer holding the append lock: let it go, so that
    # one failing test does not hang the ones after it.
    try:
        os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))  # a reader waiting for a writer
    except OSError:
        pass
    reader = os.open(path, os.O_RDONLY | os.O_NONBLOCK)  # a writer waiting for a reader
    time.sleep(0.2)
    os.close(reader)


# --------------------------------------------------------------------------------------------------
# Writing and reading back


def test_history_round_trips_records_in_order(tmp_path):
    history = HistoryFile(tmp_path / "h.jsonl")
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
    real_fsync = history_file.os.fsync
    monkeypatch.setattr(history_file.os, "fsync", lambda fd: (synced.append(fd), real_fsync(fd)))
    path = tmp_path / "deep" / "dir" / "history.jsonl"  # parent folders are made on first append
    writer = HistoryFile(path)
    record = make_record()
    writer.append(record)
    # a second HistoryFile on the same path (another process, the TUI's history pane) sees it without any close
    assert HistoryFile(path).load().records == [record]
    assert len(synced) >= 1
    writer.append(make_record())
    assert len(HistoryFile(path).load().records) == 2


def test_missing_history_is_empty_without_warnings(tmp_path):
    loaded = HistoryFile(tmp_path / "none.jsonl").load()
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
    loaded = HistoryFile(path).load()
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
    loaded = HistoryFile(path).load()
    assert loaded.records == [good] and loaded.skipped == 1
    assert len(loaded.warnings) == 1 and loaded.warnings[0].startswith(f"{path}:2: skipped: ")
    assert problem in loaded.warnings[0]


def test_a_torn_last_line_is_called_so(tmp_path):
    path = tmp_path / "h.jsonl"
    good = make_record()
    path.write_text(json.dumps(good.to_dict()) + "\n" + json.dumps(make_record().to_dict())[:57])
    for loaded in (HistoryFile(path).load(), HistoryFile(path).load(last=5)):
        assert loaded.records == [good]
        assert loaded.warnings[0].startswith(f"{path}:2: skipped: truncated last line, a write interrupted by a "
                                             "kill or crash")


def test_append_after_a_torn_line_starts_a_fresh_line(tmp_path):
    path = tmp_path / "h.jsonl"
    kept = make_record()
    path.write_text(json.dumps(kept.to_dict()) + "\n" + json.dumps(make_record().to_dict())[:40])
    new = make_record()
    HistoryFile(path).append(new)
    loaded = HistoryFile(path).load()
    # only the torn record is lost, not the new one glued onto it
    assert loaded.records == [kept, new]
    assert len(loaded.warnings) == 1 and ":2:" in loaded.warnings[0]


@pytest.mark.parametrize("content", ["root:x:0:0:root:/root:/bin/bash\n", "id,kind,p50\n1,timing,3.0\n",
                                     '{\n  "name": "a package.json"\n}\n', "[1, 2]\n", "\x00\x01binary"],
                         ids=["passwd", "csv", "pretty json", "json array", "binary"])
def test_a_file_that_is_not_a_history_is_never_appended_to(tmp_path, content):
    path = tmp_path / "other.txt"
    path.write_text(content)
    history = HistoryFile(path)
    for attempt in (history.check_writable, lambda: history.append(make_record())):
        with pytest.raises(TorchperfError, match=r"holds something else \(no line of its start is a run's record\): "
                                                 "runs are not appended to it"):
            attempt()
    assert path.read_text() == content


RECORD_LINE = json.dumps(make_record().to_dict()) + "\n"


@pytest.mark.parametrize("content", ["", "\n\n", "  \n" + RECORD_LINE, RECORD_LINE[:30] + "\n",
                                     "\ufeff" + RECORD_LINE, "\x00" * 100 + "\n" + RECORD_LINE,
                                     "{not json\n" + RECORD_LINE],
                         ids=["empty", "blank", "a record after a blank line", "a torn record", "a byte-order mark",
                              "NUL bytes a crash left", "a damaged first line"])
def test_an_empty_history_or_one_that_starts_with_a_record_takes_the_next(tmp_path, content):
    path = tmp_path / "h.jsonl"
    path.write_text(content)
    new = make_record()
    HistoryFile(path).check_writable()
    HistoryFile(path).append(new)
    assert HistoryFile(path).load().records[-1] == new


def test_history_path_argument_then_env_var_then_user_data_dir(tmp_path, monkeypatch):
    monkeypatch.setenv(HISTORY_ENV, str(tmp_path / "from_env.jsonl"))
    assert HistoryFile().path == tmp_path / "from_env.jsonl"
    assert HistoryFile(tmp_path / "explicit.jsonl").path == tmp_path / "explicit.jsonl"
    HistoryFile().append(make_record())
    assert (tmp_path / "from_env.jsonl").exists()
    monkeypatch.delenv(HISTORY_ENV)
    default = HistoryFile().path
    assert default.name == "history.jsonl" and "torchperf-tui" in str(default)


def test_non_finite_numbers_are_written_as_strict_json(tmp_path):
    record = make_record()
    record.stats = dataclasses.replace(record.stats, fps=float("inf"))
    path = tmp_path / "h.jsonl"
    HistoryFile(path).append(record)
    # parse_constant rejects Infinity/NaN, as JavaScript's and jq's parsers do
    data = json.loads(path.read_text(), parse_constant=lambda c: pytest.fail(f"{c} in JSON"))
    assert data["stats"]["fps"] is None
    assert HistoryFile(path).load().records[0].stats.fps is None


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
    loaded = HistoryFile(path).load()
    assert loaded.warnings == [] and [r.id for r in loaded.records] == ["0a1b2c3d4e5f", "ffeeddccbbaa"]
    run, no_fps = loaded.records
    assert isinstance(run.stats, TimingStats) and run.stats.fps == 400.0 and run.stats.first_iter_ms == 40.0
    assert no_fps.stats.fps is None and no_fps.stats.first_iter_ms is None
    assert "400.0/s at p50" in history_line(run) and "/s" not in history_line(no_fps).split("flags:")[0]
    for record, line in zip(loaded.records, OLD_LINES):
        assert json.dumps(record.to_dict(), separators=(",", ":")) == line


# --------------------------------------------------------------------------------------------------
# Only regular files


@posix_only
@pytest.mark.parametrize("last", [None, 1])
def test_a_fifo_is_refused_at_once_not_waited_on(fifo, last):
    _, error = in_thread(lambda: HistoryFile(fifo).load(last=last))
    assert isinstance(error, TorchperfError)
    assert str(error) == f"the history file {fifo} is a named pipe (FIFO), not a regular file"


@posix_only
def test_a_fifo_swapped_in_after_the_check_is_still_not_waited_on(fifo, monkeypatch):
    # The name check passes (as if the path were a file then), the descriptor check must catch it.
    real_stat = history_file.os.stat
    monkeypatch.setattr(history_file.os, "stat", lambda path, *a, **k: real_stat(__file__) if str(path) == str(fifo)
                        else real_stat(path, *a, **k))
    _, error = in_thread(lambda: HistoryFile(fifo).load())
    assert isinstance(error, TorchperfError) and "named pipe (FIFO)" in str(error)


@pytest.mark.skipif(not os.path.exists("/dev/zero"), reason="no /dev/zero here")
def test_dev_zero_is_refused_without_reading_it():
    # In a child with a time limit: code that reads /dev/zero does not stop, and a thread cannot be killed.
    code = ("import resource; resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))\n"  # fail, not swap
            "from torchperf_tui.core.errors import TorchperfError\n"
            "from torchperf_tui.engine.records.history_file import HistoryFile\n"
            "try:\n    HistoryFile('/dev/zero').load()\nexcept TorchperfError as exc:\n    print('TorchperfError', exc)")
    try:
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30)
    except subprocess.TimeoutExpired:
        pytest.fail("reading /dev/zero as the history did not stop")
    assert done.stdout.strip() == ("TorchperfError the history file /dev/zero is a character device, "
                                   "not a regular file"), done.stderr[-500:]


def test_a_directory_is_refused(tmp_path):
    with pytest.raises(TorchperfError, match="is a directory, not a regular file"):
        HistoryFile(tmp_path).load()
    with pytest.raises(TorchperfError, match="is a directory, not a regular file"):
        HistoryFile(tmp_path).load(last=3)


@posix_only
def test_appending_to_a_fifo_or_a_directory_is_refused_at_once(fifo, tmp_path):
    _, error = in_thread(lambda: HistoryFile(fifo).append(make_record()))
    assert isinstance(error, TorchperfError) and not isinstance(error, HistoryNotDurable)
    assert "named pipe (FIFO), not a regular file" in str(error)
    with pytest.raises(TorchperfError, match="directory, not a regular file"):
        HistoryFile(tmp_path).append(make_record())


@posix_only
def test_appending_through_a_symbolic_link_is_refused_as_an_export_is(tmp_path, monkeypatch):
    target = tmp_path / "elsewhere.txt"
    target.write_text("not a history\n")
    link = tmp_path / "history.jsonl"
    link.symlink_to(target)
    with pytest.raises(TorchperfError, match="is a symbolic link, not a regular file"):
        HistoryFile(link).append(make_record())
    assert target.read_text() == "not a history\n"  # once appended to through the link
    # a link put there after the check: the open itself refuses it (O_NOFOLLOW)
    real_lstat = os.lstat
    monkeypatch.setattr(history_file.os, "lstat", lambda p, *a, **k: os.stat(tmp_path / "absent")
                        if str(p) == str(link) else real_lstat(p, *a, **k))
    with pytest.raises(TorchperfError, match="is a symbolic link, not a regular file"):
        HistoryFile(link).append(make_record())
    assert target.read_text() == "not a history\n"


# --------------------------------------------------------------------------------------------------
# Bounded lines, bounded nesting


def test_a_line_of_200000_brackets_is_a_skipped_line_not_a_recursion_error(tmp_path):
    path = tmp_path / "h.jsonl"
    good = make_record()
    path.write_text("[" * 200_000 + "\n" + '{"details": ' * 200_000 + "\n" + line_of(good) + "\n")
    for loaded in (HistoryFile(path).load(), HistoryFile(path).load(last=5)):
        assert loaded.records == [good] and loaded.skipped == 2
        assert "line 1: not valid JSON (nested too deeply)" in loaded.warnings[0]


def test_nesting_inside_a_record_is_bounded(tmp_path):
    deep: dict = {}
    for _ in range(history_records.MAX_RECORD_DEPTH + 5):
        deep = {"x": [deep]}
    bad = {**make_record().to_dict(), "details": deep}
    with pytest.raises(ValueError, match="details nests deeper than"):
        HistoryRecord.from_dict(bad)
    ok = {**make_record().to_dict(), "details": {"verdict": {"tests": [{"name": "wilcoxon", "p": 0.01}]}}}
    assert HistoryRecord.from_dict(ok).details == ok["details"]


@pytest.mark.parametrize("last", [None, 1, 2])
def test_a_line_over_the_bound_is_skipped_and_counted_without_being_held(tmp_path, monkeypatch, last):
    monkeypatch.setattr(history_file, "READ_BLOCK_BYTES", 4096)
    path = tmp_path / "h.jsonl"
    first, second = make_record(), make_record()
    with open(path, "w") as fh:
        fh.write(line_of(first) + "\n")
        fh.write('{"id": "' + "x" * (12 << 20) + '"}\n')  # 12 MB of one line
        fh.write(line_of(second) + "\n")
    tracemalloc.start()
    try:
        loaded = HistoryFile(path).load(last=last, max_line_bytes=64 << 10)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 4 << 20, f"peak {peak / 2**20:.1f} MiB: the long line was held"
    assert loaded.records == ([first, second] if last != 1 else [second])
    if last != 1:
        assert loaded.skipped == 1
        assert loaded.warnings == [f"{path}:2: skipped: longer than 64.0 KiB, the most a record may take"]


def test_binary_noise_is_one_warning_line_with_the_count(tmp_path):
    path = tmp_path / "noise.jsonl"
    path.write_bytes(random.Random(0).randbytes(1 << 20))  # about 4,000 "lines"
    loaded = HistoryFile(path).load()
    assert loaded.records == [] and loaded.skipped > 1000
    assert len(loaded.warnings) == 1
    warning = loaded.warnings[0]
    assert warning.startswith(f"{path}: skipped {loaded.skipped} bad lines (line 1: ")
    assert warning.endswith(f"; and {loaded.skipped - 3} more)") and warning.count("line ") == 3
    tail = HistoryFile(path).load(last=10)
    assert tail.records == [] and tail.skipped == loaded.skipped and len(tail.warnings) == 1
    assert tail.warnings[0].startswith(f"{path}: skipped {loaded.skipped} bad lines (line 1: ")


# --------------------------------------------------------------------------------------------------
# Every field checked


def _with(data: dict, dotted: str, value) -> dict:
    data = json.loads(json.dumps(data))
    target = data
    *parents, name = dotted.split(".")
    for parent in parents:
        target = target[parent]
    target[name] = value
    return data


WRONG = [
    ("stats.p50_ms", "fast", "stats.p50_ms is not a finite number"),
    ("stats.p99_ms", None, "stats.p99_ms is not a finite number"),
    ("stats.n", "3", "stats.n is not a whole number"),
    ("stats.n", True, "stats.n is not a whole number"),
    ("stats.n", 2.5, "stats.n is not a whole number"),
    ("stats.mean_ms", 10 ** 400, "stats.mean_ms is not a finite number"),
    ("stats.fps", "many", "stats.fps is not a finite number"),
    ("stats.first_iter_ms", [1], "stats.first_iter_ms is not a finite number"),
    ("stats", [1, 2], "stats is a JSON array, not an object"),
    ("id", 12, "id is not a string"),
    ("kind", None, "kind is not a string"),
    ("created_at", 1700000000, "created_at is not a string"),
    ("model", ["resnet18"], "model is not a string"),
    ("dtype", 32, "dtype is not a string"),
    ("device", {"cuda": 0}, "device is not a string"),
    ("flags_text", 1, "flags_text is not a string"),
    ("timer", False, "timer is not a string"),
    ("input_shape", [1, "3", 224], "input_shape is not a list of whole numbers"),
    ("input_shape", [True, 3], "input_shape is not a list of whole numbers"),
    ("input_shape", [], "input_shape is not a list of whole numbers"),
    ("samples_ms", ["a"], "a sample in samples_ms is not a finite number"),
    ("samples_ms", "1,2,3", "samples_ms is a JSON string"),
    ("flags", ["cudnn"], "flags is a JSON array, not an object"),
    ("details", "fast", "details is a JSON string, not an object"),
    ("fingerprint", 3, "fingerprint is a JSON number, not an object"),
    ("cancelled", "yes", "cancelled is not true or false"),
    ("channels_last", 1, "channels_last is not true or false"),
    ("duration_s", "1.5", "duration_s is not a finite number"),
    ("schema", "1", "schema is not a whole number"),
]


@pytest.mark.parametrize("field, value, problem", WRONG, ids=[f"{f}={v!r}"[:40] for f, v, _ in WRONG])
def test_a_record_with_a_wrong_type_is_skipped_and_the_good_ones_survive(tmp_path, field, value, problem):
    path = tmp_path / "h.jsonl"
    good1, good2 = make_record(), make_record()
    bad = _with(make_record().to_dict(), field, value)
    path.write_text("\n".join([line_of(good1), json.dumps(bad), line_of(good2)]) + "\n")
    for loaded in (HistoryFile(path).load(), HistoryFile(path).load(last=2), HistoryFile(path).load(last=3)):
        assert loaded.records == [good1, good2]
        assert loaded.skipped == 1 and len(loaded.warnings) == 1
        assert loaded.warnings[0].startswith(f"{path}:2: skipped: {problem}")
    # what the issue saw fail whole: every record that loads can be summed up and exported
    for record in HistoryFile(path).load().records:
        history_line(record)
    for fmt in EXPORT_FORMATS:
        export_records(HistoryFile(path).load().records, fmt)


def test_non_finite_json_literals_are_refused_where_numbers_belong(tmp_path):
    path = tmp_path / "h.jsonl"
    good = make_record()
    text = line_of(make_record()).replace('"p50_ms": 10.0', '"p50_ms": NaN')
    assert "NaN" in text
    path.write_text(text + "\n" + line_of(good) + "\n")
    loaded = HistoryFile(path).load()
    assert loaded.records == [good] and "stats.p50_ms is not a finite number" in loaded.warnings[0]


def test_what_the_writer_writes_the_reader_reads(tmp_path):
    """The checks are not stricter than the writer: no fps, no first iteration, no stats, null fields,
    whole-number latencies, an A/B arm's nested details."""
    plain = make_record()
    no_fps = make_record()
    no_fps.stats = dataclasses.replace(no_fps.stats, fps=None, first_iter_ms=None)
    cancelled = make_record()
    cancelled.stats, cancelled.samples_ms, cancelled.cancelled, cancelled.duration_s = None, [], True, None
    arm = make_record()
    arm.kind = "ab"
    arm.details = {"arm": "A", "pair": "0123456789ab", "spec": "threads=2", "shapes": "random", "blocks": 4,
                   "verdict": {"significant": True, "tests": [{"name": "mann-whitney", "p": 1e-9}]}}
    history = HistoryFile(tmp_path / "h.jsonl")
    history.extend([plain, no_fps, cancelled, arm])
    loaded = history.load()
    assert loaded.warnings == [] and [r.id for r in loaded.records] == [plain.id, no_fps.id, cancelled.id, arm.id]
    assert loaded.records[1].stats.fps is None and loaded.records[2].stats is None
    assert loaded.records[3].details == arm.details
    whole = _with(plain.to_dict(), "stats.p50_ms", 10)
    assert HistoryRecord.from_dict(whole).stats.p50_ms == 10.0


# --------------------------------------------------------------------------------------------------
# Reading from the end


def mixed_history(path, rng: random.Random, n: int = 40, torn: bool = True) -> list[HistoryRecord]:
    """Good records among blank lines, bad lines, lines longer than a small read block, and a torn end."""
    good = []
    lines = []
    for i in range(n):
        record = make_record(p50=1.0 + i)
        if rng.random() < 0.3:
            record.details = {"note": "y" * rng.randint(100, 3000)}  # longer than the small blocks below
        good.append(record)
        lines.append(line_of(record))
        for _ in range(rng.choice([0, 0, 0, 1, 2])):
            lines.append(rng.choice(["", "   ", "{not json", "[1]", '{"id": 1}', "\x00\xff"]))
    text = "\n".join(lines) + "\n"
    if torn:
        text += line_of(make_record())[:80]
    path.write_bytes(text.encode("utf-8", "surrogateescape"))
    return good


@pytest.mark.parametrize("block", [7, 64, 1000, 1 << 18])
def test_last_n_read_backwards_gives_the_newest_n_and_pages_cover_the_file(tmp_path, monkeypatch, block):
    monkeypatch.setattr(history_file, "READ_BLOCK_BYTES", block)
    path = tmp_path / "h.jsonl"
    good = mixed_history(path, random.Random(block))
    full = HistoryFile(path).load()
    assert full.records == good and full.start == 0 and not full.more_before
    assert full.offsets == [path.read_bytes().index(line_of(r).encode()) for r in good]
    for n in (1, 2, 3, 10, 39, 40, 41, 100):
        loaded = HistoryFile(path).load(last=n)
        assert loaded.records == good[-n:], n
        assert loaded.offsets == full.offsets[-n:]
        assert loaded.more_before == (n < len(good))
        assert loaded.skipped >= 1 and len(loaded.warnings) == 1  # the torn end at least, read first
    assert HistoryFile(path).load(last=0).records == []
    # pages of 7, newest first, each read before the last one's start, make up the whole file
    pages, before, skipped = [], None, 0
    while True:
        page = HistoryFile(path).load(last=7, before=before)
        pages.insert(0, page.records)
        skipped += page.skipped
        if not page.more_before:
            break
        before = page.start
    assert [r for page in pages for r in page] == good
    assert skipped == full.skipped


def test_last_n_names_bad_lines_by_their_line_numbers(tmp_path):
    path = tmp_path / "h.jsonl"
    a, b, c = make_record(), make_record(), make_record()
    path.write_text("\n".join([line_of(a), "oops", line_of(b), "", "{bad", "[2]", line_of(c)]) + "\n")
    loaded = HistoryFile(path).load(last=2)
    assert loaded.records == [b, c] and loaded.skipped == 2
    assert loaded.warnings[0].startswith(f"{path}: skipped 2 bad lines (line 5: not valid JSON")
    assert "; line 6: a JSON array" in loaded.warnings[0]
    everything = HistoryFile(path).load(last=3)
    assert everything.records == [a, b, c] and everything.skipped == 3 and "(line 2: " in everything.warnings[0]


@pytest.mark.skipif(not os.path.exists("/proc/self/io"), reason="needs Linux's /proc/self/io to count reads")
def test_last_n_does_not_read_the_whole_file(tmp_path):
    path = tmp_path / "big.jsonl"
    newest = [make_record(), make_record()]
    with open(path, "wb") as fh:
        fh.truncate(256 << 20)  # 256 MiB of (sparse) zeros first: one huge bad line, if it were read
        fh.seek(0, os.SEEK_END)
        fh.write(("\n" + "\n".join(line_of(r) for r in newest) + "\n").encode())

    def bytes_read() -> int:
        with open("/proc/self/io") as fh:
            return next(int(line.split()[1]) for line in fh if line.startswith("rchar:"))

    before = bytes_read()
    loaded = HistoryFile(path).load(last=2)
    read = bytes_read() - before
    assert loaded.records == newest and loaded.warnings == [] and loaded.more_before
    assert read < 4 << 20, f"read {read / 2**20:.1f} MiB of a 256 MiB file for the last two records"


def test_a_file_that_grows_between_pages_keeps_its_pages(tmp_path):
    path = tmp_path / "h.jsonl"
    history = HistoryFile(path)
    records = [make_record(p50=float(i + 1)) for i in range(10)]
    history.extend(records)
    newest = history.load(last=4)
    history.append(make_record())  # a run finishes while the user reads older pages
    older = history.load(last=4, before=newest.start)
    assert older.records == records[2:6]


# --------------------------------------------------------------------------------------------------
# Writing: what a failed fsync means


def test_a_failed_fsync_says_the_run_was_saved_but_not_flushed(tmp_path, monkeypatch):
    path = tmp_path / "h.jsonl"
    HistoryFile(path).append(make_record())  # the file and its folder entry exist

    def failing_fsync(fd):
        raise OSError(errno.EIO, os.strerror(errno.EIO))

    monkeypatch.setattr(history_file.os, "fsync", failing_fsync)
    record = make_record()
    with pytest.raises(HistoryNotDurable) as caught:
        HistoryFile(path).append(record)
    assert isinstance(caught.value, TorchperfError)  # callers that catch TorchperfError still catch it
    assert str(caught.value) == (f"run saved to history {path}, but not flushed to disk "
                                 f"(fsync failed: {os.strerror(errno.EIO)})")
    assert caught.value.path == path and caught.value.count == 1
    monkeypatch.undo()
    assert HistoryFile(path).load().records[-1] == record  # it is in the file


def test_a_failed_folder_fsync_of_a_new_file_is_not_durable_either(tmp_path, monkeypatch):
    real_fsync = history_file.os.fsync

    def fsync(fd):
        if stat.S_ISDIR(os.fstat(fd).st_mode):
            raise OSError(errno.EIO, os.strerror(errno.EIO))
        real_fsync(fd)

    monkeypatch.setattr(history_file.os, "fsync", fsync)
    path = tmp_path / "new" / "h.jsonl"
    arms = [make_record(), make_record()]
    with pytest.raises(HistoryNotDurable, match=r"^2 runs saved to history .*not flushed to disk"):
        HistoryFile(path).extend(arms)
    assert HistoryFile(path).load().records == arms


def test_a_failed_write_is_not_saved(tmp_path, monkeypatch):
    path = tmp_path / "h.jsonl"

    def full_disk(fd, data):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(history_file.os, "write", full_disk)
    with pytest.raises(TorchperfError) as caught:
        HistoryFile(path).append(make_record())
    assert not isinstance(caught.value, HistoryNotDurable)
    assert str(caught.value) == f"cannot write the history file {path}: {os.strerror(errno.ENOSPC)}"


def test_a_record_the_reader_would_skip_is_not_written(tmp_path, monkeypatch):
    monkeypatch.setattr(history_file, "MAX_LINE_BYTES", 2000)
    record = make_record()
    record.samples_ms = [1.2345678] * 500
    with pytest.raises(TorchperfError, match="over the history's 2.0 KiB a line"):
        HistoryFile(tmp_path / "h.jsonl").append(record)
    assert not (tmp_path / "h.jsonl").exists() or (tmp_path / "h.jsonl").read_text() == ""


def test_the_default_line_bound_holds_a_long_run():
    record = make_record()
    record.samples_ms = [0.123456789012345] * 500_000  # a tiny model timed for a while
    assert len(line_of(record)) < MAX_LINE_BYTES


def test_load_result_built_by_hand_still_works():
    a = make_record()
    loaded = LoadResult([a], [])
    assert loaded.last(1) == [a] and loaded.skipped == 0 and not loaded.more_before
