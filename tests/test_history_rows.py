"""What `history` and `export --format md|csv|json` say each record is: its kind (a timing, an A/B's arm, a
generation), when it finished, what its figures are per, and its disturbance marks, worded once (wording/history.py);
every string from a record made printable (a history travels as a CI artifact); records whose latencies are no
measurement (negative, 1e308) skipped with one warning line; JSON streamed a record at a time."""

from __future__ import annotations

import csv
import io
import json
import os
import subprocess
import sys

import pytest

from tests.cli_run import run
from tests.history_kinds import B_FLAGS, DISTURBANCE, HOSTILE_MODEL, write_every_kind
from tests.records import make_record
from torchperf_tui.engine.records.export import write_json
from torchperf_tui.engine.records.history_file import HistoryFile
from torchperf_tui.engine.records.history_records import HistoryRecord
from torchperf_tui.core.formatting import printable
from torchperf_tui.wording.history import history_line
from torchperf_tui.wording.history_export import export_records

# What a terminal acts on (C0, DEL, C1) and the bidirectional overrides (text shown in another order than written)
CONTROL = [chr(c) for c in (*range(0x20), 0x7F, *range(0x80, 0xA0), *range(0x202A, 0x202F), *range(0x2066, 0x206A))]


@pytest.fixture
def history(tmp_path):
    path = tmp_path / "h.jsonl"
    return str(path), write_every_kind(path)


def no_control(text: str) -> bool:
    """No control character but the newlines between lines."""
    return not any(ch in text for ch in CONTROL if ch != "\n")


def one_skip_warning(err: str) -> None:
    """The two lines with figures that are no measurement, skipped and counted in one warning line."""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "skipped 2 bad lines" in lines[0], err
    assert "stats.p50_ms is negative: -5.0" in lines[0] and "1e+308 ms, over a day" in lines[0]


def test_history_says_what_each_row_is_and_prints_no_control_character(capsys, history):
    path, records = history
    code, out, err = run(capsys, "--history", path, "history")
    assert code == 0 and no_control(out)
    one_skip_warning(err)
    lines = out.splitlines()
    assert len(lines) == 5  # the newline in a model's name did not start a line of its own
    timing, arm_a, arm_b, generation, hostile = lines
    assert timing.startswith("2026-11-22 20:30  ") and " timing " in timing and "per pass p50 10.00 ms?" in timing
    assert timing.endswith(f"[disturbed: {DISTURBANCE}]")
    assert " A/B arm A " in arm_a and "per pass p50 11.00 ms?" in arm_a and "disturbed" not in arm_a
    assert " A/B arm B " in arm_b and f"flags: {B_FLAGS}" in arm_b
    assert " generation " in generation and "64 new tokens after 128" in generation
    assert "per token p50 12.00 ms" in generation and "per pass" not in generation
    assert "evil\\x1b[2J\\x1b]0;owned\\x07\\x0anext|line\\x9b31m\\u202eright" in hostile
    assert "-5" not in out and "1e+308" not in out  # the two bad records are not shown as figures


def test_export_md_has_kind_per_and_marks_and_escapes_what_would_break_the_table(capsys, history):
    path, _ = history
    code, out, err = run(capsys, "--history", path, "export", "--format", "md")
    assert code == 0 and no_control(out)
    one_skip_warning(err)
    lines = out.splitlines()
    header = [cell.strip() for cell in lines[0].strip("|").split("|")]
    assert header[:4] == ["When (UTC)", "ID", "Kind", "Model"] and {"Per", "Flags", "Marks"} <= set(header)
    rows = [[cell.strip() for cell in line.replace("\\|", "¦").strip("|").split("|")] for line in lines[2:7]]
    assert all(len(row) == len(header) for row in rows)  # a '|' in a name is escaped: no extra cell
    cells = [dict(zip(header, row)) for row in rows]
    assert [(c["Kind"], c["Per"]) for c in cells] == [("timing", "pass"), ("A/B arm A", "pass"), ("A/B arm B", "pass"),
                                                      ("generation", "token"), ("timing", "pass")]
    assert cells[0]["Marks"] == f"disturbed: {DISTURBANCE}" and cells[1]["Marks"] == ""
    assert cells[0]["When (UTC)"] == "2026-11-22 20:30:00" and cells[2]["Flags"] == B_FLAGS
    assert cells[3]["p50"] == "12.00 ms?" and "64 new tokens after 128" in cells[3]["Input"]
    assert cells[4]["Model"] == "evil\\x1b[2J\\x1b]0;owned\\x07\\x0anext¦line\\x9b31m\\u202eright"
    assert "-5.00" not in out and len(lines) == 9  # the table's 5 runs, a blank line and the legend of '?'


def test_export_csv_carries_kind_per_and_the_disturbance_marks(capsys, history):
    path, records = history
    code, out, err = run(capsys, "--history", path, "export", "--format", "csv")
    assert code == 0 and no_control(out)
    one_skip_warning(err)
    rows = list(csv.DictReader(io.StringIO(out)))
    assert [(r["kind"], r["what"], r["per"]) for r in rows] == [
        ("timing", "timing", "pass"), ("ab", "A/B arm A", "pass"), ("ab", "A/B arm B", "pass"),
        ("generate", "generation", "token"), ("timing", "timing", "pass")]
    assert rows[0]["disturbed"] == DISTURBANCE and rows[0]["marks"] == f"disturbed: {DISTURBANCE}"
    assert all(r["disturbed"] == "" for r in rows[1:])
    assert rows[4]["model"] == printable(HOSTILE_MODEL) and rows[4]["id"] == records["hostile"].id


def test_export_json_keeps_every_value_but_sends_no_control_character(capsys, history, tmp_path):
    path, records = history
    code, out, err = run(capsys, "--history", path, "export", "--format", "json")
    assert code == 0 and no_control(out)
    one_skip_warning(err)
    back = [HistoryRecord.from_dict(item) for item in json.loads(out)]
    assert back == list(records.values())  # the hostile name parses back as it was: escaped, not changed
    target = tmp_path / "runs.json"
    code, _, err = run(capsys, "--history", path, "export", "--format", "json", "--output", str(target))
    assert code == 0 and "wrote 5 runs" in err and target.read_text(encoding="utf-8") == out
    code, listed, _ = run(capsys, "--history", path, "history", "--json")
    assert code == 0 and listed == out


def test_the_fleet_formats_send_no_control_character_either(capsys, history):
    path, _ = history
    for fmt in ("github-benchmark", "pytorch-v3"):
        code, out, _ = run(capsys, "--history", path, "export", "--format", fmt)
        assert code == 0 and no_control(out) and json.loads(out), fmt


def test_export_json_writes_each_record_before_the_next_is_read():
    """The export is streamed: a record is written out before the next is read (the whole list is never held)."""
    out = io.StringIO()
    written_before: list[int] = []

    def records():
        for p50 in (10.0, 11.0, 12.0):
            written_before.append(len(out.getvalue()))
            yield make_record(p50)

    assert write_json(records(), out) == 3
    assert written_before[0] < written_before[1] < written_before[2]  # each record was out before the next came
    assert [r["stats"]["p50_ms"] for r in json.loads(out.getvalue())] == [10.0, 11.0, 12.0]


def test_export_reads_the_history_a_line_at_a_time(capsys, history, monkeypatch):
    """Without --last, `export` and `history` never load the whole file into a list of records."""
    path, _ = history

    def whole_file(self, last=None, **kwargs):
        assert last is not None, "the whole history loaded at once"
        return original(self, last=last, **kwargs)

    original = HistoryFile.load
    monkeypatch.setattr(HistoryFile, "load", whole_file)
    for argv in (["export", "--format", "json"], ["export", "--format", "md"], ["history"], ["history", "--json"]):
        code, out, _ = run(capsys, "--history", path, *argv)
        assert code == 0 and "resnet18" in out, argv
    code, out, _ = run(capsys, "--history", path, "history", "--last", "1")
    assert code == 0 and out.count("\n") == 1 and "evil" in out


def test_an_empty_history_exports_valid_text(capsys, tmp_path):
    path = str(tmp_path / "none.jsonl")
    code, out, _ = run(capsys, "--history", path, "export", "--format", "json")
    assert code == 0 and json.loads(out) == []
    code, out, _ = run(capsys, "--history", path, "history")
    assert code == 0 and "no runs recorded yet" in out


@pytest.mark.parametrize("field, value, problem", [
    ("samples_ms", [1.0, -0.5, 2.0], "a sample in samples_ms is negative: -0.5"),
    ("samples_ms", [1.0, 1e308], "a sample in samples_ms is 1e+308 ms, over a day"),
    ("stats.p99_ms", 1e308, "stats.p99_ms is 1e+308 ms, over a day"),
    ("stats.min_ms", -1.0, "stats.min_ms is negative: -1.0"),
    ("stats.fps", -3.0, "stats.fps is negative: -3.0"),
    ("duration_s", -1.0, "duration_s is negative: -1.0"),
    ("details.ttft_stats", {"p50_ms": -2.0}, "details.ttft_stats.p50_ms is negative: -2.0"),
    ("details.ttft_ms", [3.0, 1e300], "a time in details.ttft_ms is 1e+300 ms, over a day"),
    ("details.tokens_per_s", -80.0, "details.tokens_per_s is negative: -80.0"),
    ("details.tokens_per_s", 10**400, "details.tokens_per_s is not a finite number"),
])
def test_a_record_whose_figures_are_no_measurement_is_skipped(field, value, problem):
    data = make_record().to_dict()
    where, _, name = field.rpartition(".")
    (data[where] if where else data)[name] = value
    with pytest.raises(ValueError, match="^" + problem.replace("(", r"\(").replace("+", r"\+")):
        HistoryRecord.from_dict(data)


def test_a_comparison_shows_a_flag_value_from_a_file_escaped():
    from torchperf_tui.engine.records.history_compare import compare_records

    hostile = make_record(12.0, flags={"sdpa": "\x1b[2Jflash"})
    summary = compare_records(make_record(10.0, flags={"sdpa": "math"}), hostile).summary()
    assert "sdpa math->\\x1b[2Jflash" in summary and no_control(summary)


@pytest.mark.parametrize("text, shown", [
    ("resnet18", "resnet18"), ("a\x1b[2Jb", "a\\x1b[2Jb"), ("two\nlines", "two\\x0alines"), ("csi\x9bx", "csi\\x9bx"),
    ("rtl\u202eevil", "rtl\\u202eevil"), ("sep\u2028x", "sep\\u2028x"), ("µs · ±", "µs · ±"),
])
def test_printable_writes_out_what_a_terminal_would_act_on(text, shown):
    assert printable(text) == shown
    as_json = json.dumps(text, ensure_ascii=False)
    assert json.loads(printable(as_json, json=True)) == text and printable(as_json, json=True).isprintable()


def test_printable_cuts_to_its_limit_and_escapes_beyond_the_basic_plane_for_json():
    assert printable("x" * 30, 10) == "x" * 9 + "…"
    private = "\U000f0001"  # a private-use character: not printable
    assert json.loads(printable(json.dumps(private, ensure_ascii=False), json=True)) == private


def test_the_history_line_is_the_wording_of_every_kind():
    """`history`'s line is wording/history.py's: the record itself no longer words it."""
    record = make_record(10.0)
    assert not hasattr(record, "summary")
    assert history_line(record).startswith("2026-11-22 20:30  ") and "timing" in history_line(record)


@pytest.mark.parametrize("module", ["torchperf_tui.wording.history", "torchperf_tui.wording.history_export",
                                    "torchperf_tui.cli.history"])
def test_the_history_words_and_exports_import_no_torch(module):
    code = f"import sys, {module}; sys.exit('torch' in sys.modules or 'numpy' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code]).returncode == 0


def test_export_md_of_records_given_in_code_matches_the_cli(capsys, history):
    path, records = history
    code, out, _ = run(capsys, "--history", path, "export", "--format", "md")
    assert export_records(records.values(), "md") == out


def cli(*argv, stdout) -> subprocess.CompletedProcess:
    """The CLI in a process of its own, its stdout where a shell would put it."""
    return subprocess.run([sys.executable, "-m", "torchperf_tui", *argv], stdout=stdout, stderr=subprocess.PIPE,
                          text=True, timeout=120)


def test_a_reader_that_stops_early_is_no_error(tmp_path):
    """`history | head -1`: the reader has its line; no 'internal error', no traceback."""
    path = tmp_path / "h.jsonl"
    HistoryFile(path).extend([make_record(float(i % 50 + 1)) for i in range(2000)])  # more than a pipe holds
    for argv in (["history"], ["export", "--format", "json"]):
        reader = subprocess.Popen(["head", "-c", "10"], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL)
        done = cli("--history", str(path), *argv, stdout=reader.stdin)
        reader.stdin.close()
        reader.wait()
        assert done.returncode == 0 and done.stderr == "", (argv, done.stderr)


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="no /dev/full here")
def test_a_full_standard_output_is_one_line_and_exit_2(history):
    path, _ = history
    for argv in (["history"], ["export", "--format", "md"]):
        with open("/dev/full", "w") as full:
            done = cli("--history", path, *argv, stdout=full)
        assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
        assert "cannot write the standard output: No space left on device" in done.stderr


def test_each_kind_says_what_its_figures_are_per():
    import dataclasses

    from torchperf_tui.wording.history import history_row

    train = dataclasses.replace(make_record(), details={"step": "train", "optimizer": "sgd"})
    arm = dataclasses.replace(make_record(), kind="ab", details={"arm": "B", "step": "train", "optimizer": "sgd"})
    newer = dataclasses.replace(make_record(), kind="sweep\x1b[2J")  # a kind from a newer version, or a forged one
    rows = [history_row(record) for record in (make_record(), train, arm, newer)]
    assert [(row.kind, row.per, row.compact_per()) for row in rows] == [
        ("timing", "pass", "pass"), ("timing", "training step", "step"), ("A/B arm B", "training step", "B step"),
        ("sweep\\x1b[2J", "iteration", "iter")]
    assert "per training step p50 10.00 ms?" in history_line(train)
    cancelled = dataclasses.replace(make_record(), stats=None, samples_ms=[], cancelled=True)
    assert history_line(cancelled).endswith("no timed samples  flags: defaults  [cancelled]")


@pytest.mark.parametrize("fmt, runs, samples", [("json", 300, 2000), ("md", 300, 2000), ("csv", 3000, 3)])
def test_an_export_holds_one_record_at_a_time_not_the_history(fmt, runs, samples, tmp_path):
    """Memory flat however long the history: 300 records of 2,000 samples take some 19 MB held at once, 3,000 CSV
    rows some 10 MB; an export of them, as they are read, stays far under that (CSV's rows wait in a file)."""
    import dataclasses
    import tracemalloc

    from torchperf_tui.wording.history_export import write_export

    def records():
        for i in range(runs):
            yield dataclasses.replace(make_record(10.0 + i % 7), samples_ms=[10.0 + j / 100 for j in range(samples)])

    with open(tmp_path / f"out.{fmt}", "w", encoding="utf-8") as out:
        tracemalloc.start()
        try:
            write_export(records(), fmt, out)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
    assert peak < 3 * 2**20, f"{peak / 2**20:.1f} MiB"
