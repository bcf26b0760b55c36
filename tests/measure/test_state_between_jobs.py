"""The measurement process runs every job from its own pristine torch state: a model whose factory sets the
thread count has that said on its result, and the next model runs on the process's own count again.

Starts the real process (a few seconds), as the app does."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from torchperf_tui.engine.measurements.bench_config import BenchConfig
from torchperf_tui.measure.client import MeasurementProcess
from torchperf_tui.measure.protocol import JobDone

from tests.measure.test_measurement_process import Recorder


@contextlib.contextmanager
def _started() -> Iterator[tuple[MeasurementProcess, Recorder]]:
    """The real measurement process, started, and the recorder of what it says; stopped however the block ends."""
    rec = Recorder()
    process = MeasurementProcess(rec.on_event, rec.on_notice)
    process.start()
    try:
        yield process, rec
    finally:
        process.stop()


def _time(process: MeasurementProcess, rec: Recorder, model: str) -> JobDone:
    cfg = BenchConfig(model=model, input_shape=(1, 3, 16, 16), warmup=1, iters=5, device="cpu")
    job = process.submit("time", {"cfg": cfg}, f"timing {model}")
    rec.wait_for(lambda: rec.end_of(job) is not None, timeout=120)
    done = rec.end_of(job)
    assert isinstance(done, JobDone), done
    return done


def _process_threads(process: MeasurementProcess, rec: Recorder, timeout: float = 60) -> int:
    """The thread count torch reports in the measurement process now, between jobs (a device probe)."""
    probe = process.submit("probe", {}, "probing")
    rec.wait_for(lambda: rec.end_of(probe) is not None, timeout=timeout)
    return rec.end_of(probe).result.cpu.torch_threads


def test_a_factory_that_sets_threads_is_said_and_the_next_model_runs_on_the_process_own_count():
    with _started() as (process, rec):
        before = _time(process, rec, "tests.tinymodels:tiny_cnn").result
        own = before.threads_used
        assert own is not None and before.state_notes == []
        assert before.flags_text() == f"threads={own} (default)"

        hostile = _time(process, rec, "tests.state_changing_models:factory_sets_threads").result
        assert len(hostile.state_notes) == 1 and "torch threads to" in hostile.state_notes[0]
        assert "factory" in hostile.state_notes[0] and "put back" in hostile.state_notes[0]
        assert hostile.threads_used == own  # overridden for the run: its numbers are the process's own

        after = _time(process, rec, "tests.tinymodels:tiny_cnn").result
        assert after.state_notes == [] and after.threads_used == own  # nothing leaked into the next model
        assert _process_threads(process, rec) == own


def test_a_job_that_is_not_a_run_has_its_changes_put_back_and_said_in_its_extra():
    """The analysis runs the factory too (on the meta device): what it set is put back before the next job."""
    with _started() as (process, rec):
        job = process.submit("analyse", {"model": "tests.state_changing_models:factory_sets_threads", "batch": 1,
                                         "input_shape": (1, 3, 16, 16), "dtype": "float32"}, "analysing")
        rec.wait_for(lambda: rec.end_of(job) is not None, timeout=120)
        done = rec.end_of(job)
        assert isinstance(done, JobDone), done
        assert any("torch threads to" in note for note in done.extra["state_notes"])
        after = _time(process, rec, "tests.tinymodels:tiny_cnn").result
        assert after.state_notes == [] and after.flags_text() == f"threads={after.threads_used} (default)"
        assert _process_threads(process, rec) == after.threads_used


def test_what_a_module_sets_at_import_is_said_put_back_and_never_taken_for_the_process_own_state():
    with _started() as (process, rec):
        own = _process_threads(process, rec, timeout=120)  # nothing of the model's has run: the process's own count
        hostile = _time(process, rec, "tests.import_sets_threads:factory").result
        assert [note for note in hostile.state_notes if "at import" in note] == [
            f"the model's module tests.import_sets_threads set torch threads to {1 if own != 1 else 2} at import: "
            f"put back to {own} for the job"]
        assert hostile.threads_used == own and hostile.flags_text() == f"threads={own} (default)"
        after = _time(process, rec, "tests.tinymodels:tiny_cnn").result
        assert after.state_notes == [] and after.threads_used == own
