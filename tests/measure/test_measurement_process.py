"""The measurement process: jobs round-trip, a process that dies or hangs is replaced, and the next job works.

These start the real process (a new interpreter that imports torch: a few seconds each), as the app does.
"""

from __future__ import annotations

import pickle
import sys
import time

import pytest

from torchperf_tui.engine.measurements.bench_config import BenchConfig
from torchperf_tui.measure.client import (BUILD_GRACE_S, CANCEL_GRACE_S, JobInfo, MeasurementProcess, default_log_path,
                                           describe_exit, grace_of)
from torchperf_tui.measure.protocol import (PROTOCOL_VERSION, JobDone, JobFailed, ProtocolError, Ready, Samples,
                                           StartJob, pack, unpack)

from tests.measure.recorder import Recorder

TINY = "tests.tinymodels:tiny_cnn"


@pytest.fixture
def measurement():
    recorder = Recorder()
    process = MeasurementProcess(recorder.on_event, recorder.on_notice)
    process.start()
    yield process, recorder
    process.stop()


def _cfg(model: str = TINY, **kw) -> BenchConfig:
    values = dict(model=model, input_shape=(1, 3, 16, 16), warmup=1, iters=20, device="cpu")
    values.update(kw)
    return BenchConfig(**values)


def test_the_protocol_refuses_another_version_and_round_trips_its_own():
    message = StartJob(3, "time", {"cfg": _cfg()})
    assert unpack(pickle.loads(pickle.dumps(pack(message)))) == message
    with pytest.raises(ProtocolError, match="version"):
        unpack((PROTOCOL_VERSION + 1, message))
    with pytest.raises(ProtocolError):
        unpack("hello")


def test_describe_exit_names_the_signal():
    assert describe_exit(-9) == "was killed (SIGKILL)" and describe_exit(3) == "exited with code 3"


def test_a_timing_job_streams_samples_and_returns_its_result_without_torch_here(measurement):
    process, rec = measurement
    job = process.submit("time", {"cfg": _cfg()}, "timing tiny")
    rec.wait_for(lambda: rec.end_of(job) is not None)
    done = rec.end_of(job)
    assert isinstance(done, JobDone) and len(done.result.samples_ms) == 20
    streamed = [s for e in rec.events if isinstance(e, Samples) and e.phase == "timed" for s in e.samples_ms]
    assert streamed == list(done.result.samples_ms)  # every sample, in order, before the result
    assert done.extra["fingerprint"]["torch"]
    assert any(isinstance(e, Ready) for e in rec.events) and process.pid not in (None, 0)
    assert "torch" not in sys.modules or "pytest" in sys.modules  # (pytest's own process has torch: see below)


def test_a_job_reads_the_files_its_sender_chose_as_it_sent_it_not_those_the_process_started_with(
        measurement, tmp_path, monkeypatch):
    """A process that serves several senders (the tests' shared one) reads each job's history and ceilings where
    that job's sender chose them."""
    import json

    from tests.engine.test_hostile_files import _valid_ceilings

    process, rec = measurement  # started under the test's own $TORCHPERF_CEILINGS, where none are kept
    kept = tmp_path / "elsewhere.json"
    kept.write_text(json.dumps(_valid_ceilings()))
    monkeypatch.setenv("TORCHPERF_CEILINGS", str(kept))
    there = process.submit("ceilings_kept", {"device": "cpu"})
    monkeypatch.setenv("TORCHPERF_CEILINGS", str(tmp_path / "none-here.json"))
    nowhere = process.submit("ceilings_kept", {"device": "cpu"})
    rec.wait_for(lambda: rec.end_of(there) is not None and rec.end_of(nowhere) is not None)
    assert isinstance(rec.end_of(there), JobDone) and rec.end_of(there).result.path == str(kept)
    assert isinstance(rec.end_of(nowhere), JobDone) and rec.end_of(nowhere).result is None


def test_a_model_that_kills_its_process_fails_its_job_and_the_next_job_works(measurement):
    process, rec = measurement
    job = process.submit("time", {"cfg": _cfg("tests.hostilemodels:kills_its_process", input_shape=(1, 8))},
                         "timing tests.hostilemodels:kills_its_process at 1x8")
    rec.wait_for(lambda: rec.end_of(job) is not None)
    failed = rec.end_of(job)
    assert isinstance(failed, JobFailed)
    assert failed.error.startswith("the measurement process was killed (SIGKILL) while timing "
                                   "tests.hostilemodels:kills_its_process at 1x8 (during a pass of "
                                   "tests.hostilemodels:kills_its_process); started a new one")
    after = process.submit("time", {"cfg": _cfg(iters=3)})
    rec.wait_for(lambda: rec.end_of(after) is not None)
    assert isinstance(rec.end_of(after), JobDone)


def test_a_forward_that_ignores_cancel_is_killed_within_the_grace_and_replaced(measurement):
    process, rec = measurement
    job = process.submit("time", {"cfg": _cfg("tests.hostilemodels:ignores_cancel", input_shape=(1, 8))},
                         "timing the sleeper")
    rec.wait_for(lambda: any(isinstance(e, Samples) and e.phase == "first" for e in rec.events))
    time.sleep(1.0)  # inside the second pass, which sleeps for a minute (a margin for a busy box)
    started = time.monotonic()
    process.cancel(job, grace_s=1.0)
    rec.wait_for(lambda: rec.end_of(job) is not None, timeout=10)
    assert time.monotonic() - started < 4
    assert "did not stop timing the sleeper within" in rec.end_of(job).error
    after = process.submit("memory")
    rec.wait_for(lambda: rec.end_of(after) is not None)
    assert isinstance(rec.end_of(after), JobDone)


def test_a_job_that_iterates_gets_the_short_grace_one_that_builds_or_analyses_the_long_one():
    assert CANCEL_GRACE_S < BUILD_GRACE_S
    assert grace_of(JobInfo(1, "time", {}, "timing", running=True, iterating=True)) == CANCEL_GRACE_S
    assert grace_of(JobInfo(2, "analyse", {}, "analysing", running=True)) == BUILD_GRACE_S


def test_a_cancelled_run_stops_between_iterations_with_what_it_has(measurement):
    process, rec = measurement
    job = process.submit("time", {"cfg": _cfg(iters=1_000_000)})
    rec.wait_for(lambda: any(isinstance(e, Samples) and e.phase == "timed" for e in rec.events))
    process.cancel(job)
    rec.wait_for(lambda: rec.end_of(job) is not None, timeout=10)
    done = rec.end_of(job)
    assert isinstance(done, JobDone) and done.result.cancelled and 0 < len(done.result.samples_ms) < 1_000_000


def test_release_runs_where_the_model_was_and_reports_it(measurement):
    process, rec = measurement
    job = process.submit("release", {"device": "cpu"})
    rec.wait_for(lambda: rec.end_of(job) is not None)
    done = rec.end_of(job)
    assert isinstance(done, JobDone) and done.result.device == "cpu"
    reading = process.submit("memory")
    rec.wait_for(lambda: rec.end_of(reading) is not None)
    assert rec.end_of(reading).result["pid"] == process.pid != 0


def test_one_measurement_at_a_time_a_measuring_job_cancels_the_one_in_flight(measurement):
    process, rec = measurement
    run = process.submit("time", {"cfg": _cfg(iters=1_000_000)}, "the long run")
    rec.wait_for(lambda: any(isinstance(e, Samples) and e.phase == "timed" and e.job_id == run for e in rec.events))
    reading = process.submit("memory")  # not a measurement: it waits its turn, cancels nothing
    check = process.submit("determinism", {"cfg": _cfg()}, "the check")
    rec.wait_for(lambda: rec.end_of(check) is not None)
    stopped = rec.end_of(run)
    assert isinstance(stopped, JobDone) and stopped.result.cancelled  # the run ended with what it had
    assert isinstance(rec.end_of(check), JobDone) and isinstance(rec.end_of(reading), JobDone)
    ends = [e.job_id for e in rec.events if isinstance(e, (JobDone, JobFailed))]
    assert ends.index(run) < ends.index(check)  # never both on the machine


BLOCKS_WHEN_BUILT = "tests.hostile_process_models:blocks_when_built"


@pytest.fixture
def blocking_mark(tmp_path, monkeypatch):
    """The file the blocking models create as they start blocking (requested before `measurement`, so the
    measurement process it starts sees the variable)."""
    mark = tmp_path / "blocking"
    monkeypatch.setenv("TORCHPERF_TEST_MARK", str(mark))
    return mark


def _blocking_job(process, mark, kind="time"):
    """A job whose model blocks in its build (never checking its cancel flag), once it has started blocking."""
    params = ({"cfg": _cfg(BLOCKS_WHEN_BUILT, input_shape=(1, 8))} if kind == "time" else
              {"model": BLOCKS_WHEN_BUILT, "batch": 1, "input_shape": None, "dtype": "float32"})
    job = process.submit(kind, params, f"{kind} of the blocker")
    deadline = time.monotonic() + 120
    while not mark.exists():
        assert time.monotonic() < deadline, "the model never started blocking"
        time.sleep(0.05)
    return job


def test_a_build_that_blocks_is_killed_within_the_grace_of_a_cancel_and_the_next_job_works(blocking_mark,
                                                                                           measurement):
    process, rec = measurement
    job = _blocking_job(process, blocking_mark)
    started = time.monotonic()
    process.cancel(job)  # not iterating yet: the build's grace
    rec.wait_for(lambda: rec.end_of(job) is not None, timeout=60)
    took = time.monotonic() - started
    assert BUILD_GRACE_S - 0.5 < took < BUILD_GRACE_S + 8  # a big model's healthy build is not killed at 2 s
    assert f"did not stop time of the blocker within {BUILD_GRACE_S:g} s" in rec.end_of(job).error
    after = process.submit("time", {"cfg": _cfg(iters=3)})
    rec.wait_for(lambda: rec.end_of(after) is not None, timeout=120)
    assert isinstance(rec.end_of(after), JobDone)


def test_an_analysis_cancelled_without_enforcing_is_killed_once_a_new_request_waits_behind_it(blocking_mark,
                                                                                              measurement):
    process, rec = measurement
    job = _blocking_job(process, blocking_mark, kind="analyse")
    process.cancel(job, enforce=False)  # its result merely dropped: alone, it would hold the process for ever
    after = process.submit("analyse", {"model": TINY, "batch": 1, "input_shape": (1, 3, 16, 16), "dtype": "float32"})
    rec.wait_for(lambda: rec.end_of(after) is not None, timeout=120)
    assert isinstance(rec.end_of(after), JobDone) and rec.end_of(after).result.params_total > 0
    assert "did not stop analyse of the blocker" in rec.end_of(job).error
    assert any("killed it" in notice and "started a new one" in notice for notice in rec.notices)


def test_each_process_has_its_own_log_named_after_it_and_an_empty_one_is_removed(tmp_path):
    assert default_log_path().endswith("measurement-{pid}.log")
    rec = Recorder()
    process = MeasurementProcess(rec.on_event, rec.on_notice, log_path=str(tmp_path / "m-{pid}.log"))
    process.start()
    try:
        rec.wait_for(lambda: any(isinstance(e, Ready) for e in rec.events))
        assert process.log_path == str(tmp_path / f"m-{process.pid}.log") and process.pid != __import__("os").getpid()
        assert (tmp_path / f"m-{process.pid}.log").exists()
        quiet_pid = process.pid
    finally:
        process.stop()
    assert not (tmp_path / f"m-{quiet_pid}.log").exists()  # nothing was written: nothing left behind
    rec = Recorder()
    process = MeasurementProcess(rec.on_event, rec.on_notice, log_path=str(tmp_path / "m-{pid}.log"))
    process.start()
    try:
        job = process.submit("time", {"cfg": _cfg("tests.hostile_process_models:prints_as_it_goes",
                                                  input_shape=(1, 8), iters=2)})
        rec.wait_for(lambda: rec.end_of(job) is not None)
        chatty_pid = process.pid
    finally:
        process.stop()
    assert "hello from the factory" in (tmp_path / f"m-{chatty_pid}.log").read_text()  # kept: it holds something


def test_a_log_left_by_an_older_process_of_the_same_pid_is_not_taken_for_this_ones(tmp_path):
    """A pid comes round again: the log an older process of that pid left (it held a crash, so it was kept) must not
    be named as this process's, with the older one's words in it. The template here has no {pid}, so the path is
    the older log's whatever pid the new process gets."""
    stale = tmp_path / "m-fixed.log"
    stale.write_text("hostile model: blocking now\n")  # what an older process wrote before it was killed
    rec = Recorder()
    process = MeasurementProcess(rec.on_event, rec.on_notice, log_path=str(stale))
    process.start()
    try:
        rec.wait_for(lambda: any(isinstance(e, Ready) for e in rec.events))
        assert process.log_path == str(stale) and "blocking" not in stale.read_text()
    finally:
        process.stop()
    assert not stale.exists()  # this process wrote nothing: its empty log is removed as any other


def test_an_enforced_cancel_that_finds_its_job_finished_meanwhile_leaves_the_process_serving(measurement):
    """_enforce_cancel sees the job running, lets go of the lock, and the job's JobDone comes before _replace
    takes it again: the process must be left as it is, serving, not dropped with nothing in its place."""
    process, rec = measurement
    job = process.submit("time", {"cfg": _cfg(iters=2)}, "the quick run")
    rec.wait_for(lambda: rec.end_of(job) is not None)
    serving = process._process
    process._replace(serving, "the measurement process did not stop the quick run within 2 s", job)
    assert process._process is serving and serving.poll() is None and not rec.notices
    after = process.submit("time", {"cfg": _cfg(iters=2)})
    rec.wait_for(lambda: rec.end_of(after) is not None)
    assert isinstance(rec.end_of(after), JobDone) and process._process is serving
