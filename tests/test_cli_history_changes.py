"""`history --changes` on a history written here: a planted step found at the record it starts with, its size and
interval and the torch upgrade beside it; none in a stationary set-up; a short one said to be too short; --json names
the first record after each change point by its id; hostile histories are refused in one line or read safely."""

from __future__ import annotations

import json
import os
import re

import pytest

from tests.cli_run import run
from tests.engine.test_change_points import noisy_medians, records_of
from tests.engine.test_history_file import in_thread
from tests.history_kinds import HOSTILE_MODEL, write_every_kind
from tests.records import ENV
from torchperf_tui.engine.records.history_file import HistoryFile


@pytest.fixture()
def planted(tmp_path):
    """A history of three set-ups, their records interleaved as days of CI would write them: float32 steps from
    about 10 ms to 13 ms at its 21st record, where torch goes from 2.14.1 to 2.15.0; float16 only wanders; resnet50
    has 4 records."""
    def env_at(i):
        return {**ENV, "torch": "2.14.1" if i < 20 else "2.15.0"}

    stepped = records_of(noisy_medians([(10.0, 20), (13.0, 20)], seed=5), env_at=env_at)
    stationary = records_of(noisy_medians([(20.0, 40)], seed=6), env_at=env_at, dtype="float16")
    short = records_of([5.0, 5.1, 4.9, 5.0], model="resnet50")
    path = tmp_path / "history.jsonl"
    HistoryFile(path).extend([r for pair in zip(stepped, stationary) for r in pair] + short)
    return path, stepped


def test_the_planted_step_is_found_the_stationary_set_up_has_none_and_the_short_one_is_too_short(capsys, planted):
    path, stepped = planted
    code, out, err = run(capsys, "--history", str(path), "history", "--changes")
    assert code == 0 and err == "", err
    lines = out.splitlines()
    # The bootstrap's interval, to the digit, is scipy's version's: its shape is checked here, its bounds in --json.
    interval = re.fullmatch(r"(.*)\(95 % CI \+\d+\.\d % to \+\d+\.\d %\)(.*)", lines[1])
    assert interval is not None, lines[1]
    assert interval.groups() == (f"  from {stepped[20].id[:8]} (2026-01-21 10:00): 9.93 ms -> 12.91 ms, +30.0 % ",
                                 "; coinciding: torch 2.14.1 -> 2.15.0")
    assert lines[:1] + lines[2:] == [
        "resnet18 1x3x224x224 float32 [defaults] on cuda NVIDIA H100 80GB HBM3: 40 records, 2026-01-01 10:00 to "
        "2026-02-12 10:00",
        "resnet18 1x3x224x224 float16 [defaults] on cuda NVIDIA H100 80GB HBM3: 40 records, 2026-01-01 10:00 to "
        "2026-02-12 10:00",
        "  no change point in 40 records",
        "resnet50 1x3x224x224 float32 [defaults] on cuda NVIDIA H100 80GB HBM3: 4 records, 2026-01-01 10:00 to "
        "2026-01-04 10:00",
        "  too short to tell: change points need at least 8 records",
    ]


def test_the_json_lists_each_series_and_names_the_first_record_after_each_change_point(capsys, planted):
    path, stepped = planted
    code, out, _ = run(capsys, "--history", str(path), "history", "--changes", "--json")
    series = json.loads(out)
    assert code == 0 and [(s["records"], s["too_short"], len(s["change_points"])) for s in series] == \
        [(40, False, 1), (40, False, 0), (4, True, 0)]
    change = series[0]["change_points"][0]
    assert (change["record_id"], change["previous_id"], change["index"]) == (stepped[20].id, stepped[19].id, 20)
    assert change["change_pct"] == pytest.approx(30.0, abs=0.05)
    assert 1.25 < change["ci_low"] < change["ratio"] < change["ci_high"] < 1.35 and change["p_value"] < 0.05
    assert change["environment"] == [{"name": "torch", "before": "2.14.1", "after": "2.15.0"}]
    assert series[0]["setup"].startswith("resnet18 1x3x224x224 float32") and series[0]["first_id"] == stepped[0].id


def test_last_n_takes_the_newest_records_before_the_series_are_made(capsys, planted):
    path, _ = planted
    code, out, _ = run(capsys, "--history", str(path), "history", "--changes", "--last", "24")
    lines = out.splitlines()
    assert code == 0 and lines[1] == "  no change point in 10 records"  # 10 float32 runs, all after the step
    assert lines[-1] == "  too short to tell: change points need at least 8 records"


@pytest.mark.parametrize("write", [None, "", "not json\n"], ids=["missing", "empty", "junk"])
def test_a_history_without_a_run_says_so_in_one_line(capsys, tmp_path, write):
    path = tmp_path / "history.jsonl"
    if write is not None:
        path.write_text(write)
    code, out, err = run(capsys, "--history", str(path), "history", "--changes")
    assert code == 0 and out == f"no run with a timed sample recorded yet ({path})\n"
    assert err.count("\n") == (1 if write else 0)  # the bad line: one warning
    code, out, _ = run(capsys, "--history", str(path), "history", "--changes", "--json")
    assert (code, json.loads(out)) == (0, [])


def test_a_history_path_that_is_a_directory_is_one_line_and_exit_2(capsys, tmp_path):
    code, out, err = run(capsys, "--history", str(tmp_path), "history", "--changes")
    assert code == 2 and out == "" and len(err.splitlines()) == 1 and "is a directory, not a regular file" in err


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs POSIX FIFOs")
def test_a_history_fifo_is_refused_not_waited_on(capsys, tmp_path):
    fifo = tmp_path / "history.fifo"
    os.mkfifo(fifo)
    (code, out, err), error = in_thread(lambda: run(capsys, "--history", str(fifo), "history", "--changes"),
                                        timeout=60)
    assert error is None and code == 2 and out == "" and len(err.splitlines()) == 1
    assert "is a named pipe (FIFO), not a regular file" in err


def test_hostile_records_are_shown_printable_and_bad_lines_warned_once(capsys, tmp_path):
    path = tmp_path / "history.jsonl"
    write_every_kind(path)
    code, out, err = run(capsys, "--history", str(path), "history", "--changes")
    assert code == 0 and "Traceback" not in err and len(err.splitlines()) == 1 and "skipped" in err
    assert "\x1b" not in out and "\x9b" not in out and "\u202e" not in out and HOSTILE_MODEL not in out
    assert out.count("too short to tell") == len([line for line in out.splitlines() if not line.startswith("  ")])
