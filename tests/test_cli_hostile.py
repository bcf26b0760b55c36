"""Hostile and careless input to the CLI: one line on stderr and exit 2, never a file clobbered, a hang or a
traceback. Each case here was found by a probe of the released CLI."""

from __future__ import annotations

import os
import stat

import pytest

from tests.test_cli import TINY, run

HOSTILE = "tests.hostilemodels"


def _leftovers(folder) -> list[str]:
    return [name for name in os.listdir(folder) if name.endswith(".tmp") or name.endswith(".part")]


# -- 1. paths the app writes ---------------------------------------------------------------------------

def _fifo(tmp_path):
    path = tmp_path / "fifo"
    os.mkfifo(path)
    return path, "a named pipe (FIFO)"


def _empty_dir(tmp_path):
    path = tmp_path / "empty"
    path.mkdir()
    return path, "a directory"


def _full_dir(tmp_path):
    path = tmp_path / "full"
    path.mkdir()
    (path / "keep.txt").write_text("mine")
    return path, "a directory"


def _symlink(tmp_path):
    real = tmp_path / "real.json"
    real.write_text("precious")
    path = tmp_path / "link.json"
    path.symlink_to(real)
    return path, "a symbolic link"


def _missing_folder(tmp_path):
    return tmp_path / "no" / "such" / "trace.json", "does not exist"


@pytest.mark.parametrize("make", [_fifo, _empty_dir, _full_dir, _symlink, _missing_folder],
                         ids=["fifo", "empty-dir", "non-empty-dir", "symlink", "missing-folder"])
def test_profile_trace_refuses_a_path_that_is_not_a_regular_file(capsys, tmp_path, make):
    path, why = make(tmp_path)
    before = os.lstat(path) if os.path.lexists(path) else None
    code, out, err = run(capsys, "profile", TINY, "--input", "1x3x8x8", "--iters", "1", "--trace", str(path))
    assert code == 2 and out == "" and why in err and err.count("\n") == 1
    if before is not None:  # the same kind of thing is still there, untouched
        after = os.lstat(path)
        assert stat.S_IFMT(after.st_mode) == stat.S_IFMT(before.st_mode) and after.st_ino == before.st_ino
    assert _leftovers(tmp_path) == []
    if make is _symlink:
        assert (tmp_path / "real.json").read_text() == "precious"
    if make is _full_dir:
        assert os.listdir(path) == ["keep.txt"]


def test_profile_trace_replaces_a_regular_file_whole_and_leaves_no_temporary(capsys, tmp_path):
    path = tmp_path / "trace.json"
    path.write_text("old")
    code, out, err = run(capsys, "profile", TINY, "--input", "1x3x8x8", "--iters", "1", "--trace", str(path))
    assert code == 0 and f"{path}" in out
    assert path.read_text().lstrip().startswith("{") and "traceEvents" in path.read_text()
    assert _leftovers(tmp_path) == []


@pytest.mark.parametrize("make", [_fifo, _empty_dir, _symlink, _missing_folder],
                         ids=["fifo", "dir", "symlink", "missing-folder"])
def test_export_output_refuses_what_is_not_a_regular_file(capsys, tmp_path, make):
    path, why = make(tmp_path)
    code, out, err = run(capsys, "export", "--format", "csv", "--output", str(path))
    assert code == 2 and why in err and err.count("\n") == 1
    assert _leftovers(tmp_path) == []


def test_export_output_writes_a_regular_file(capsys, tmp_path):
    path = tmp_path / "runs.csv"
    code, _, err = run(capsys, "export", "--format", "csv", "--output", str(path))
    assert code == 0 and path.read_text().startswith("id,kind,") and _leftovers(tmp_path) == []


# -- 2, 3, 8. numbers ---------------------------------------------------------------------------------

@pytest.mark.parametrize("argv, message", [
    (["bench", TINY, "--threads", "99999"], "logical CPU"),
    (["compare", TINY, "--a", "threads=99999", "--b", ""], "logical CPU"),
    (["--interval", "nan"], "finite"),
    (["--interval", "inf"], "finite"),
    (["--interval", "1e-9"], ">= 0.1"),
    (["--interval", "-1"], ">= 0.1"),
    (["throughput", TINY, "--memory-cap", "nan"], "finite"),
    (["throughput", TINY, "--memory-cap", "inf"], "finite"),
    (["throughput", TINY, "--memory-cap", "0"], "> 0"),
    (["roofline", TINY, "--peak-tflops", "nan"], "finite"),
    (["roofline", TINY, "--peak-tflops", "-1"], "> 0"),
    (["roofline", TINY, "--peak-tflops", "0"], "> 0"),
    (["roofline", TINY, "--peak-tflops", "inf"], "finite"),
    (["roofline", TINY, "--peak-bandwidth", "nan"], "finite"),
    (["compare", TINY, "--a", "", "--b", "", "--seed", "-5"], "at least 0"),
    (["compare", TINY, "--a", "", "--b", "", "--seed", str(2**32)], "at most"),
    (["flops", "resnet18", "--input", "1x3x99999999999999999999x8"], "a dimension is over"),
    (["flops", "resnet18", "--input", "100000x3x100000x1000"], "more than any device holds"),
    (["bench", TINY, "--batch", "99999999999"], "a dimension is over"),
    (["flops", TINY, "--input", ""], "empty input shape"),
    (["bench", TINY, "--input", "", "--iters", "1"], "empty input shape"),
])
def test_bad_numbers_are_refused_before_any_work(capsys, argv, message):
    code, out, err = run(capsys, *argv)
    assert code == 2 and out == "" and message in err and err.count("\n") == 1, err


# -- 7, 8. the model's own code failing ---------------------------------------------------------------

@pytest.mark.parametrize("factory, message", [
    ("fails_on_fifth_call", "failed while running at input 1x8 (float32) after 4 pass(es) that ran: "
                            "RuntimeError: the model broke on its fifth call"),
    ("divides_by_zero", "ZeroDivisionError"),
    ("missing_key", "KeyError: 'b'"),
    ("exits_in_forward", "called sys.exit(3)"),
    ("exits_in_factory", "called sys.exit(4) while building the model"),
    ("shape_not_a_tuple", "input_shape must be a tuple of whole numbers"),
])
def test_a_failing_model_is_the_models_error_exit_2(capsys, factory, message):
    code, out, err = run(capsys, "bench", f"{HOSTILE}:{factory}", "--iters", "5", "--warmup", "2", "--no-history")
    assert code == 2 and message in err and err.count("\n") == 1, err
    assert "internal error" not in err and "rejected input" not in err


def test_sys_exit_at_import_is_reported_not_obeyed(capsys):
    code, _, err = run(capsys, "flops", "tests.hostile_exit_on_import:factory")
    assert code == 2 and "importing 'tests.hostile_exit_on_import' called sys.exit(5)" in err


def test_sys_exit_in_forward_on_the_meta_device_is_reported(capsys):
    code, _, err = run(capsys, "flops", f"{HOSTILE}:exits_in_forward")
    assert code == 2 and "called sys.exit(3) while analysing" in err


# -- the measurement process: the model's code cannot end, hold or write into a command ----------------------

PROCESS_MODELS = "tests.hostile_process_models"


def _cli(*argv, timeout: float = 180, **kwargs):
    """The CLI as a user runs it, in a process of its own (a model's os._exit must not end the test's)."""
    import subprocess
    import sys

    return subprocess.run([sys.executable, "-m", "torchperf_tui", *argv], capture_output=True, text=True,
                          timeout=timeout, **kwargs)


@pytest.mark.parametrize("spec, code, during", [
    ("tests.hostile_os_exit_on_import:factory", 3, "the import of tests.hostile_os_exit_on_import"),
    (f"{PROCESS_MODELS}:os_exits_in_factory", 4, f"the build of {PROCESS_MODELS}:os_exits_in_factory"),
    (f"{PROCESS_MODELS}:os_exits_in_forward", 5, f"a pass of {PROCESS_MODELS}:os_exits_in_forward"),
], ids=["import", "build", "forward"])
def test_os_exit_in_the_models_code_is_one_line_and_exit_2_not_its_code(spec, code, during):
    proc = _cli("bench", spec, "--iters", "3", "--warmup", "1", "--no-history")
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and proc.stdout == "" and len(lines) == 1, proc.stderr
    assert lines[0] == (f"torchperf-tui: error: the measurement process exited with code {code} while timing "
                        f"{spec} (during {during})")


def test_a_thread_the_model_leaves_running_does_not_keep_the_command_alive():
    proc = _cli("bench", f"{PROCESS_MODELS}:starts_a_thread_that_never_ends", "--iters", "3", "--warmup", "1",
                "--no-history", timeout=120)  # the thread sleeps for 11 days: a hang fails on the timeout
    assert proc.returncode == 0 and "p50" in proc.stdout, proc.stderr


def test_what_the_model_prints_goes_to_stderr_never_into_json():
    import json

    proc = _cli("bench", f"{PROCESS_MODELS}:prints_as_it_goes", "--iters", "3", "--warmup", "1", "--no-history",
                "--json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["stats"]["n"] == 3  # the whole of stdout is the JSON
    assert "hello from the factory" in proc.stderr and "hello from forward" in proc.stderr


@pytest.mark.parametrize("factory", ["blocks_in_forward", "blocks_when_built"])
def test_ctrl_c_on_a_model_that_blocks_ends_the_command_within_the_grace(factory):
    import signal
    import subprocess
    import sys
    import time

    from tests.hostile_process_models import BLOCKING
    from torchperf_tui.measure.client import CANCEL_GRACE_S

    def as_from_a_terminal() -> None:
        # Ctrl-C reaches a command typed in a terminal. A suite started in the background of a script (the stress
        # script's, a CI runner's) inherits SIGINT ignored, and Python then never raises KeyboardInterrupt: the
        # command would sit out the timeout (seen in scripts/stress_suite.sh runs, never in a foreground one).
        signal.signal(signal.SIGINT, signal.SIG_DFL)

    proc = subprocess.Popen([sys.executable, "-m", "torchperf_tui", "bench", f"{PROCESS_MODELS}:{factory}",
                             "--iters", "3", "--no-history"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, preexec_fn=as_from_a_terminal)
    try:
        for line in proc.stderr:  # the model says when it starts blocking (its stdout is the CLI's stderr)
            if BLOCKING in line:
                break
        sent = time.monotonic()
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
        took = time.monotonic() - sent
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130 and err.strip() == "torchperf-tui: interrupted", err
    assert took < CANCEL_GRACE_S + 10  # the grace, then a kill: never the 11 days the model sleeps


def _interrupted(argv: tuple, said: str, times: int = 1, reader_gone: bool = False):
    """The CLI run with `argv`, Ctrl-C once stderr has said `said` `times` times (the first batch timed, a model's
    print): (exit code, stdout, stderr). `reader_gone`: stdout's reader has closed its end before then (`| head -1`
    done)."""
    import signal
    import subprocess
    import sys

    proc = subprocess.Popen([sys.executable, "-m", "torchperf_tui", *argv], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))  # as from a terminal
    try:
        if reader_gone:
            proc.stdout.close()
        lines = []
        for line in proc.stderr:
            lines.append(line)
            if sum(said in seen for seen in lines) >= times:
                break
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    return proc.returncode, out, "".join(lines) + err


@pytest.mark.parametrize("budget, first", [((), "(grow): fits"), (("--slo", "p50=10s"), "(grow): p50")],
                         ids=["samples-per-s", "slo"])
def test_ctrl_c_during_a_search_shows_the_batches_timed_before_it_then_exit_130(budget, first):
    """A search cut short by Ctrl-C is shown as far as it went (as the app's c keeps it), then the interrupt ends
    the command as any other: exit 130."""
    code, out, err = _interrupted(("throughput", TINY, "--input", "1x3x16x16", *budget), first)
    assert code == 130 and err.strip().splitlines()[-1] == "torchperf-tui: interrupted", err
    words = " ".join(out.split())
    assert "cancelled while growing" in words, out  # where the cancel found it
    batch_one = next(row for row in out.splitlines() if row.split()[:1] == ["1"])  # batch 1's row in the table
    assert "µs" in batch_one or "ms" in batch_one


@pytest.mark.parametrize("argv, said, times", [
    (("throughput", TINY, "--input", "1x3x16x16"), "(grow): fits", 1),  # the batch said as it is timed
    (("bench", f"{PROCESS_MODELS}:prints_as_it_goes", "--iters", "100000", "--warmup", "1", "--no-history", "--json"),
     "hello from forward", 20),  # --json says nothing as it goes: the model's prints (on stderr) say it runs
], ids=["words", "json"])
def test_ctrl_c_with_stdouts_reader_gone_still_ends_interrupted_exit_130(argv, said, times):
    """What the job kept cannot be shown (a closed pipe): the command still ends as an interrupt, not exit 1."""
    code, _, err = _interrupted(argv, said, times, reader_gone=True)
    assert code == 130 and err.strip().splitlines()[-1] == "torchperf-tui: interrupted", err[-2000:]


def _cut_short(monkeypatch, emptied: dict | None = None) -> None:
    """Every job of the command runs whole, then goes up as a Ctrl-C that came after it had kept all it timed (its
    result marked cancelled; `emptied`: with those fields emptied, as a Ctrl-C before anything was timed)."""
    import dataclasses

    from torchperf_tui.measure import cli_jobs

    real = cli_jobs.run_job

    def cut_short(kind, params, what="", **callbacks):
        result, extra = real(kind, params, what, **callbacks)
        raise cli_jobs.Interrupted(dataclasses.replace(result, cancelled=True, **(emptied or {})), extra)

    monkeypatch.setattr(cli_jobs, "run_job", cut_short)


def test_a_bench_ctrl_c_cut_short_shows_its_samples_and_keeps_no_record(capsys, monkeypatch, tmp_path):
    """bench's share of the same: the samples taken are shown (said cancelled), nothing goes into the history."""
    _cut_short(monkeypatch)
    history = tmp_path / "history.jsonl"
    code, out, err = run(capsys, "--history", str(history), "bench", TINY, "--input", "1x3x8x8", "--iters", "5",
                         "--warmup", "1")
    assert code == 130 and err.strip().splitlines()[-1] == "torchperf-tui: interrupted"
    assert "iterations" in out and "cancelled before the end" in out
    assert not history.exists() or history.read_text() == ""


@pytest.mark.parametrize("emptied, shown", [(None, True), ({"modes": []}, False)], ids=["modes-timed", "none-timed"])
def test_a_bench_modes_ctrl_c_shows_the_modes_timed_and_nothing_when_none_was(capsys, monkeypatch, emptied, shown):
    _cut_short(monkeypatch, emptied)
    code, out, err = run(capsys, "bench", TINY, "--input", "1x3x8x8", "--iters", "4", "--warmup", "1",
                         "--modes", "sync", "--json")
    assert code == 130 and err.strip().splitlines()[-1] == "torchperf-tui: interrupted"
    if shown:
        import json

        data = json.loads(out)
        assert data["cancelled"] is True and data["modes"][0]["mode"] == "sync"
    else:
        assert out == ""  # cancelled before anything was measured: nothing to show


OUTPUT_MODELS = "tests.process_output_models"


def test_a_keyboard_interrupt_raised_by_the_models_code_is_its_error_in_one_line_exit_2():
    """Not the user's Ctrl-C (that is exit 130): the model's own raise, so the model's error, exit 2."""
    proc = _cli("bench", f"{OUTPUT_MODELS}:raises_keyboard_interrupt", "--input", "1x8", "--iters", "3",
                "--warmup", "1", "--no-history")
    assert proc.returncode == 2 and proc.stdout == "", proc.stderr
    assert proc.stderr.splitlines() == ["torchperf-tui: error: the model's code raised KeyboardInterrupt: "
                                        "the model's own"]


def test_a_segfault_is_one_line_naming_the_log_that_holds_the_crash_dump():
    import re

    spec = f"{OUTPUT_MODELS}:segfaults_in_forward"
    proc = _cli("bench", spec, "--input", "1x8", "--iters", "3", "--warmup", "1", "--no-history")
    lines = proc.stderr.splitlines()
    assert proc.returncode == 2 and proc.stdout == "" and len(lines) == 1, proc.stderr
    found = re.fullmatch(rf"torchperf-tui: error: the measurement process was killed \(SIGSEGV\) while timing "
                         rf"{re.escape(spec)} \(during a pass of {re.escape(spec)}\) \(its log: (.+)\)", lines[0])
    assert found is not None, lines[0]
    try:
        assert "Segmentation fault" in open(found.group(1)).read()  # faulthandler's dump, with the Python stack
    finally:
        os.unlink(found.group(1))
