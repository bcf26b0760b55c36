"""What a CLI command leaves behind when it ends, however it ends: no measurement process, and no empty
measurement-<pid>.log in the temp folder (a log that holds something is kept, and named where the command says why
it failed: tests/test_cli_hostile.py). SIGTERM and SIGHUP end the command with one line and 128 + the signal's
number; after a SIGKILL of the command, the measurement process sees it gone and removes its own empty log."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from tests.hostile_process_models import BLOCKING

PROCESS_MODELS = "tests.hostile_process_models"


def _logs(tmp_path) -> list[str]:
    folder = tmp_path / f"torchperf-tui-{os.getuid()}"
    return sorted(os.listdir(folder)) if folder.is_dir() else []


def _gone(pid: int, timeout: float = 30.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.1)
    return False


def _cli(tmp_path, *argv) -> subprocess.Popen:
    """The CLI as a user runs it, its temp folder (where measurement logs go) the test's own."""
    env = dict(os.environ, TMPDIR=str(tmp_path))
    return subprocess.Popen([sys.executable, "-m", "torchperf_tui", *argv], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env)


@pytest.mark.parametrize("sig, said", [(signal.SIGTERM, "terminated (SIGTERM)"), (signal.SIGHUP, "terminated (SIGHUP)"),
                                       (signal.SIGKILL, None)], ids=["SIGTERM", "SIGHUP", "SIGKILL"])
def test_a_command_ended_by_a_signal_mid_run_leaves_no_process_and_no_empty_log(tmp_path, sig, said):
    proc = _cli(tmp_path, "bench", f"{PROCESS_MODELS}:blocks_in_forward", "--iters", "3", "--no-history")
    try:
        for line in proc.stderr:  # the model says when it blocks (its prints are the command's stderr)
            if BLOCKING in line:
                break
        logs = _logs(tmp_path)
        assert len(logs) == 1 and logs[0].startswith("measurement-"), logs  # the running process's, empty
        measurement_pid = int(logs[0].removeprefix("measurement-").removesuffix(".log"))
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    if said is None:
        assert proc.returncode == -sig
    else:
        assert proc.returncode == 128 + sig and err.strip() == f"torchperf-tui: {said}", err
    assert _gone(measurement_pid), "the measurement process outlived its command"
    assert _logs(tmp_path) == []


def test_a_profile_leaves_no_log(tmp_path):
    proc = _cli(tmp_path, "profile", "tests.tinymodels:tiny_cnn", "--input", "1x3x16x16", "--iters", "2",
                "--trace", str(tmp_path / "trace.json"))
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err
    assert _logs(tmp_path) == []  # the profiler's own chatter (Kineto's stages) no longer fills it
