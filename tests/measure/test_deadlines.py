"""The deadlines on a running job (measure/deadlines.py): a model silent past its deadline (blocked in its build, its
analysis or a pass) is stopped with its process, in one line that says which part did not finish; a process takes
its place for the next request; a run that keeps making progress is never cut, however long it takes in all."""

from __future__ import annotations


import pytest

from torchperf_tui.engine.measurements.bench_config import BenchConfig
from torchperf_tui.core.errors import TorchperfError
from torchperf_tui.measure.client import MeasurementProcess
from torchperf_tui.measure.deadlines import BUILD_DEADLINE_S, BUILD_ENV, PASS_DEADLINE_S, PASS_ENV, Deadlines, stage
from torchperf_tui.measure.protocol import JobDone, JobFailed

from tests.measure.recorder import Recorder

STALLING = "tests.stalling_models"
TINY = "tests.tinymodels:tiny_cnn"


def config(model: str, **kw) -> BenchConfig:
    values = dict(model=model, input_shape=(1, 8), warmup=1, iters=3, device="cpu", time_budget_s=None)
    values.update(kw)
    return BenchConfig(**values)


# -- the numbers and the words ------------------------------------------------------------------------------

def test_the_deadlines_come_from_the_environment_and_a_bad_value_is_one_line():
    assert Deadlines.from_env({}) == Deadlines(BUILD_DEADLINE_S, PASS_DEADLINE_S)
    assert Deadlines.from_env({BUILD_ENV: "5", PASS_ENV: " 2.5 "}) == Deadlines(5.0, 2.5)
    for bad in ("0", "-3", "nan", "inf", "ten"):
        with pytest.raises(TorchperfError) as info:
            Deadlines.from_env({PASS_ENV: bad})
        assert str(info.value) == (f"{PASS_ENV}={bad!r}: give a number of seconds > 0 (the default is "
                                   f"{PASS_DEADLINE_S:g})")


@pytest.mark.parametrize("phase, passed, samples_phase, said", [
    ("the import of m", False, "", "the import of its module"),
    ("the analysis of m:f", False, "", "its analysis"),
    ("the build of m:f", False, "", "its build"),
    ("a pass of m:f", False, "", "its first pass"),
    ("a pass of m:f", True, "warmup", "a warm-up pass (or the first timed one)"),
    ("a pass of m:f", True, "timed", "a timed pass"),
    ("a pass of m:f", True, "", "a pass"),
    ("", False, "", "its work"),
])
def test_the_line_names_the_part_that_did_not_finish(phase, passed, samples_phase, said):
    assert stage(phase, passed, samples_phase) == said


def test_a_bad_deadline_in_the_environment_fails_each_job_with_its_line_and_starts_nothing(monkeypatch):
    monkeypatch.setenv(BUILD_ENV, "soon")
    events = Recorder()
    process = MeasurementProcess(events.on_event, events.on_notice)
    process.start()
    try:
        job = process.submit("time", {"cfg": config(TINY)})
        end = events.ended(job, timeout=5)
    finally:
        process.stop()
    assert isinstance(end, JobFailed) and end.error.startswith(f"{BUILD_ENV}='soon': give a number of seconds > 0")
    assert process.pid is None


# -- the real measurement process ---------------------------------------------------------------------------

def test_an_analysis_that_never_ends_is_stopped_and_a_new_process_serves_the_next_request():
    events = Recorder()
    # A fresh process's first job imports the engine's modules before its model's phases begin: seconds on a busy
    # box, which a deadline of a few seconds would take for the model's silence.
    process = MeasurementProcess(events.on_event, events.on_notice, deadlines=Deadlines(build_s=15, pass_s=15))
    process.start()
    try:
        spec = f"{STALLING}:sleeps_when_built"
        job = process.submit("analyse", {"model": spec, "batch": 1, "input_shape": None, "dtype": "float32"},
                             f"analysing {spec}")
        end = events.ended(job)
        assert isinstance(end, JobFailed) and not end.internal
        assert end.error.startswith(f"analysing {spec}: the model did not finish its analysis within 15 s; stopped "
                                    f"its measurement process ({BUILD_ENV}=SECONDS waits longer)")
        assert end.error.endswith("; started a new one") and any("did not finish" in n for n in events.notices)
        process.deadlines = Deadlines()  # the next request, as long as it needs: a busy box's first job is slow
        after = process.submit("time", {"cfg": config(TINY, input_shape=(1, 3, 16, 16))})
        assert isinstance(events.ended(after), JobDone)
    finally:
        process.stop()


def test_a_run_that_keeps_going_is_never_cut_however_long_it_takes_in_all():
    events = Recorder()
    process = MeasurementProcess(events.on_event, events.on_notice, deadlines=Deadlines(build_s=60, pass_s=4))
    process.start()
    try:
        # 1 + 1 + 16 passes of 0.4 s: about 7 s in all, each pass well within the 4 s a pass may take.
        job = process.submit("time", {"cfg": config(f"{STALLING}:slow_but_steady", iters=16)})
        end = events.ended(job)
    finally:
        process.stop()
    assert isinstance(end, JobDone), getattr(end, "error", "")
    assert len(end.result.samples_ms) == 16
