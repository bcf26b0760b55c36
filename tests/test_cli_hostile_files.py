"""The CLI on hostile file paths (issue 32, findings 1, 4 and 12): a ceilings file that is no file is one line and
exit 2 before anything is measured, a corrupt one is never shown as a ceiling; where the ceilings are kept is
checked before they are measured; no output is written over the history in use or the ceilings file, by any name;
a history that cannot take a run's record is said before the run, not after it. (The engine's side, a FIFO and
/dev/zero among them: tests/engine/test_hostile_files.py.)"""

from __future__ import annotations

import json
import os

import pytest

from tests.engine.test_hostile_files import _read_only_folder, _valid_ceilings, keep_history_and_ceilings
from tests.cli_run import no_job_sent
from tests.records import make_record
from tests.test_cli import TINY, run
from torchperf_tui.engine.measurements import ceiling_measurement
from torchperf_tui.engine.records.history_file import HistoryFile

SMALL = ("--input", "1x3x8x8")


@pytest.fixture(autouse=True)
def _jobs_in_this_process(monkeypatch):
    """The commands' jobs run in this process (tests/measure/in_process.py), so that a test sees what they
    would have measured; the paths are read and written as in a measurement process of their own."""
    from tests.measure.in_process import InProcessMeasurement

    monkeypatch.setattr("torchperf_tui.measure.cli_jobs.MeasurementProcess", InProcessMeasurement)


@pytest.fixture
def nothing_measured(monkeypatch) -> None:
    """Measuring anything fails the test: a refusal must come first."""
    def measure(*args, **kwargs):
        raise AssertionError("measured before the path was checked")

    monkeypatch.setattr(ceiling_measurement, "measure_ceilings", measure)
    monkeypatch.setattr("torchperf_tui.engine.measurements.timing.run_benchmark", measure)


@pytest.fixture
def no_job(monkeypatch) -> list:
    """The jobs a command sent (none may be: the history is checked before any is)."""
    from torchperf_tui.measure import cli_jobs

    return no_job_sent(monkeypatch, cli_jobs, "the history was checked")


def one_line(code, out, err) -> str:
    lines = err.strip().splitlines()
    assert code == 2 and out == "" and len(lines) == 1 and "Traceback" not in err, (code, out, err)
    return lines[0]


def _huge(tmp_path):
    path = tmp_path / "huge.json"
    with open(path, "wb") as fh:
        fh.truncate(100 << 20)
    return path


# --------------------------------------------------------------------------------------------------------
# Reading the ceilings file (finding 1)


@pytest.mark.parametrize("command", [["ceilings"], ["info"], ["roofline", TINY, *SMALL, "--iters", "2"]])
@pytest.mark.parametrize("make, said", [(lambda tmp: tmp, "is a directory, not a regular file"),
                                        (_huge, "is 100.0 MiB, over the 16.0 MiB it may take: not read")],
                         ids=["dir", "huge"])
def test_a_ceilings_path_that_is_no_file_is_one_line_before_anything_is_measured(capsys, tmp_path, monkeypatch,
                                                                                  nothing_measured, command, make,
                                                                                  said):
    path = make(tmp_path)
    monkeypatch.setenv("TORCHPERF_CEILINGS", str(path))
    line = one_line(*run(capsys, *command))
    assert line == f"torchperf-tui: error: the ceilings file ($TORCHPERF_CEILINGS) {path} {said}"


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs POSIX FIFOs")
def test_a_ceilings_fifo_is_refused_not_waited_on(capsys, tmp_path, monkeypatch, nothing_measured):
    from tests.engine.test_history_file import in_thread

    fifo = tmp_path / "ceilings.fifo"
    os.mkfifo(fifo)
    monkeypatch.setenv("TORCHPERF_CEILINGS", str(fifo))
    code, error = in_thread(lambda: run(capsys, "ceilings"), timeout=60)
    assert error is None and "is a named pipe (FIFO), not a regular file" in one_line(*code)


@pytest.mark.parametrize("value", ["fast", None, float("nan"), float("inf"), -1.0])
def test_a_corrupt_ceiling_is_said_once_and_never_shown(capsys, tmp_path, monkeypatch, value):
    path = tmp_path / "ceilings.json"
    path.write_text(json.dumps(_valid_ceilings(value=value)))
    monkeypatch.setenv("TORCHPERF_CEILINGS", str(path))
    code, out, err = run(capsys, "info")
    assert code == 0 and err.count("\n") == 1 and "the entry of this device is corrupt" in err
    assert "TFLOP/s" not in out and "none measured yet" in out
    code, out, err = run(capsys, "roofline", TINY, *SMALL, "--iters", "2", "--json")
    data = json.loads(out)
    assert code == 0 and "note: the ceilings file" in err and "corrupt" in err
    assert not isinstance(data["measured_tflops"], (int, float)) and not isinstance(data["measured_mfu_pct"],
                                                                                     (int, float))
    line = one_line(*run(capsys, "ceilings"))  # not asked to measure again: said, not measured over
    assert "corrupt" in line and "ceilings --refresh" in line


# --------------------------------------------------------------------------------------------------------
# Writing it (finding 1)


@pytest.mark.parametrize("make", ["symlink", "dangling-symlink", "read-only-folder"])
def test_ceilings_are_not_measured_where_they_cannot_be_kept(capsys, tmp_path, monkeypatch, nothing_measured, make):
    real = tmp_path / "real.json"
    if make == "read-only-folder":
        path = _read_only_folder(tmp_path, monkeypatch) / "ceilings.json"
    else:
        if make == "symlink":
            real.write_text(json.dumps({"devices": {}}))
        path = tmp_path / "link.json"
        path.symlink_to(real)
    monkeypatch.setenv("TORCHPERF_CEILINGS", str(path))
    line = one_line(*run(capsys, "ceilings", "--refresh"))
    assert line.endswith("nothing was measured") and "$TORCHPERF_CEILINGS" in line
    if make != "read-only-folder":
        assert path.is_symlink() and (real.read_text() == json.dumps({"devices": {}}) if make == "symlink"
                                      else not real.exists())


# --------------------------------------------------------------------------------------------------------
# No output over the history in use or the ceilings file (finding 4)


@pytest.fixture
def kept(tmp_path, monkeypatch):
    """A history with a record and a ceilings file with this device's: (history, ceilings, their bytes)."""
    history, ceilings_file = keep_history_and_ceilings(tmp_path, monkeypatch)
    os.link(history, tmp_path / "hard.jsonl")
    return history, ceilings_file, (history.read_bytes(), ceilings_file.read_bytes())


@pytest.mark.parametrize("command", [["export", "--format", "json", "--output"],
                                     ["profile", TINY, *SMALL, "--iters", "1", "--trace"]], ids=["export", "trace"])
@pytest.mark.parametrize("name", ["same", "spelled", "hard-link", "ceilings"])
def test_no_output_is_written_over_the_history_in_use_or_the_ceilings(capsys, tmp_path, kept, command, name):
    history, ceilings_file, before = kept
    target = {"same": history, "spelled": tmp_path / "data" / ".." / "data" / "history.jsonl",
              "hard-link": tmp_path / "hard.jsonl", "ceilings": ceilings_file}[name]
    line = one_line(*run(capsys, *command, str(target)))
    what = "the ceilings file" if name == "ceilings" else "the history file in use"
    assert line == f"torchperf-tui: error: will not write {target}: it is {what}, and would lose what it keeps"
    assert (history.read_bytes(), ceilings_file.read_bytes()) == before
    assert HistoryFile(history).load().records  # every record still there


def test_the_history_given_on_the_command_line_is_the_one_kept_from_the_trace(capsys, tmp_path, kept, monkeypatch):
    mine = tmp_path / "mine.jsonl"
    HistoryFile(mine).append(make_record())
    before = mine.read_bytes()
    line = one_line(*run(capsys, "--history", str(mine), "profile", TINY, *SMALL, "--iters", "1",
                         "--trace", str(mine)))
    assert "it is the history file in use" in line and mine.read_bytes() == before


# --------------------------------------------------------------------------------------------------------
# A history that cannot take the run, said before it (finding 12)


@pytest.mark.parametrize("argv", [["bench", TINY, *SMALL], ["compare", TINY, *SMALL, "--a", "", "--b", "threads=1"],
                                  ["compare", TINY, *SMALL, "--baseline", "base.json"]],
                         ids=["bench", "compare", "gate"])
@pytest.mark.parametrize("make", ["read-only-folder", "fifo", "dir", "folder-is-a-file", "another-file"])
def test_a_history_that_cannot_take_the_run_is_said_before_it(capsys, tmp_path, monkeypatch, no_job, argv, make):
    if make == "another-file":  # a file of the user's that is no history (a CSV here): never appended to
        history = tmp_path / "runs.csv"
        history.write_text("model,p50\nresnet18,3.1\n")
    elif make == "read-only-folder":
        history = _read_only_folder(tmp_path, monkeypatch) / "history.jsonl"
    elif make == "fifo":
        history = tmp_path / "history.jsonl"
        os.mkfifo(history)
    elif make == "dir":
        history = tmp_path
    else:
        (tmp_path / "a-file").write_text("mine")
        history = tmp_path / "a-file" / "history.jsonl"
    monkeypatch.setenv("TORCHPERF_HISTORY", str(history))
    monkeypatch.chdir(tmp_path)
    line = one_line(*run(capsys, *argv))
    assert line.startswith(f"torchperf-tui: error: ") and f"history file {history}" in line
    assert line.endswith("nothing was measured (--history chooses another file, --no-history keeps none)")
    assert no_job == []
    if make == "another-file":
        assert "holds something else" in line and history.read_text() == "model,p50\nresnet18,3.1\n"


@pytest.mark.parametrize("argv", [["bench", TINY, *SMALL, "--no-history"],
                                  ["bench", TINY, *SMALL, "--modes", "sync"],
                                  ["compare", TINY, *SMALL, "--a", "", "--b", "threads=1", "--kernels"]],
                         ids=["no-history", "modes", "kernels"])
def test_a_run_that_keeps_nothing_in_the_history_does_not_ask_for_one(capsys, tmp_path, monkeypatch, no_job, argv):
    monkeypatch.setenv("TORCHPERF_HISTORY", str(tmp_path))  # a folder: no history could be written
    run(capsys, *argv)  # the fake job fails the command once it is sent
    assert len(no_job) == 1
