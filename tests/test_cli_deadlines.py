"""A model that blocks for ever does not hold a command until Ctrl-C: silent past its deadline (measure/deadlines.py,
set here by environment variables to seconds), its measurement process is stopped and the command ends with one
line that says which part did not finish, and exit 2, leaving no process and no empty log behind."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.cli_run import run
from torchperf_tui.measure.deadlines import BUILD_ENV, PASS_ENV

STALLING = "tests.stalling_models"


def _cli(tmp_path, *argv, build_s: float, pass_s: float = 300):
    env = dict(os.environ, TMPDIR=str(tmp_path), **{BUILD_ENV: f"{build_s:g}", PASS_ENV: f"{pass_s:g}"})
    return subprocess.run([sys.executable, "-m", "torchperf_tui", *argv], capture_output=True, text=True, env=env,
                          timeout=240)  # the model sleeps for 11 days: a missing deadline fails on this timeout


def _leftovers(tmp_path) -> list[str]:
    folder = tmp_path / f"torchperf-tui-{os.getuid()}"
    return os.listdir(folder) if folder.is_dir() else []


# A fresh measurement process's first job imports the engine's modules before its model's phases begin: on a busy
# box that takes seconds, which a shorter build deadline would take for the model's silence.
@pytest.mark.parametrize("argv, said", [
    (("flops", f"{STALLING}:sleeps_when_built"),
     f"analysing {STALLING}:sleeps_when_built: the model did not finish its analysis within 15 s"),
    (("bench", f"{STALLING}:sleeps_when_built", "--iters", "3", "--no-history"),
     f"timing {STALLING}:sleeps_when_built: the model did not finish its build within 15 s"),
], ids=["flops-analysis", "bench-build"])
def test_a_model_that_never_finishes_building_is_stopped_in_one_line(tmp_path, argv, said):
    proc = _cli(tmp_path, *argv, build_s=15)
    assert proc.returncode == 2 and proc.stdout == "", proc.stderr
    assert proc.stderr.splitlines() == [f"torchperf-tui: error: {said}; stopped its measurement process "
                                        f"({BUILD_ENV}=SECONDS waits longer)"]
    assert _leftovers(tmp_path) == []


def test_a_pass_that_never_returns_is_stopped_by_the_pass_deadline_and_said_to_be_a_timed_one(tmp_path):
    spec = f"{STALLING}:sleeps_on_its_fourth_pass"  # the first, one of warm-up, one timed, then the one that sleeps
    # The build deadline past the subprocess's timeout: a client that kept waiting for it once a pass had come back
    # (its watchdog asleep for the build's wait) fails here, as it took 120 s of a build deadline of 120.
    proc = _cli(tmp_path, "bench", spec, "--warmup", "1", "--iters", "5", "--no-history", build_s=600, pass_s=4)
    assert proc.returncode == 2 and proc.stdout == "", proc.stderr
    assert proc.stderr.splitlines() == [f"torchperf-tui: error: timing {spec}: the model did not finish a timed pass "
                                        f"within 4 s; stopped its measurement process ({PASS_ENV}=SECONDS waits "
                                        f"longer)"]
    assert _leftovers(tmp_path) == []


def test_a_deadline_that_is_not_a_number_of_seconds_is_one_line(capsys, monkeypatch):
    monkeypatch.setenv(PASS_ENV, "-1")
    code, out, err = run(capsys, "bench", "tests.tinymodels:tiny_cnn", "--input", "1x3x16x16", "--iters", "3",
                         "--no-history")
    assert code == 2 and out == ""
    assert err.splitlines() == [f"torchperf-tui: error: {PASS_ENV}='-1': give a number of seconds > 0 (the default "
                                f"is 300)"]
