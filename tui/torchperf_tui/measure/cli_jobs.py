"""The CLI's way to run a job: in a measurement process of its own, as the app runs every job.

`run_job(kind, params)` starts a measurement process (measure/client.py: its stdout, the model's prints, on the CLI's
stderr; its stderr, a crash dump or a traceback, in its log, named in the line that says it died), sends it the one
job (`run_jobs`: a command's several, one after another), hands its progress to callbacks while it runs, and returns
the engine's result once it is done; the process is then stopped (killed if something of the model's, a thread that
never ends, holds it). So the model's code can neither end the command (os._exit is one line and exit 2), nor keep it
alive, nor print into its output. A job that fails raises JobError (the engine's one line: exit 2) or
MeasurementBug (not the user's fault: exit 1). Ctrl-C cancels the job; one that has not stopped within
CANCEL_GRACE_S is killed with its process; then KeyboardInterrupt goes on up (exit 130), as Interrupted with what the
job kept where it ended with a result (a search's batches so far), for the command to show first. SIGTERM and SIGHUP
(measure/ending.py) stop the process at once and go on up as Terminated (exit 128 + the signal's number), so its
empty log is removed on the way out, as at any other end. No torch here.
"""

from __future__ import annotations

import queue
from typing import Any, Callable, TypeVar

from torchperf_tui.core.errors import MeasurementBug, TorchperfError
from torchperf_tui.measure.client import CANCEL_GRACE_S, MeasurementProcess
from torchperf_tui.measure.ending import Terminated
from torchperf_tui.measure.protocol import JobDone, JobFailed, Progress, Samples

T = TypeVar("T")
POLL_S = 0.2  # how often the waiting thread wakes: a Ctrl-C is seen within this


class JobError(TorchperfError):
    """The job failed with one of the engine's refusals, or its process died: one line, exit 2."""


class Interrupted(KeyboardInterrupt):
    """Ctrl-C ended a job that kept what it had measured (a search's batches, a sweep's lengths): its `result`
    (marked cancelled) and `extra`, for the command to show before the interrupt goes on up (exit 130)."""

    def __init__(self, result: Any, extra: dict) -> None:
        super().__init__()
        self.result, self.extra = result, extra


def run_job(kind: str, params: dict, what: str = "", *, on_progress: Callable[[str, Any], None] | None = None,
            on_samples: Callable[[Samples], None] | None = None,
            process_factory: Callable[..., Any] | None = None) -> tuple[Any, dict]:
    """Run one job of `kind` (measure/jobs.py) and return its (result, extra). `on_progress(what, data)` gets its
    Progress events, `on_samples(samples)` its batched Samples, on this thread, in order."""
    return run_jobs(lambda job: job(kind, params, what, on_progress=on_progress, on_samples=on_samples),
                    process_factory=process_factory)


def run_jobs(steps: Callable[[Callable[..., tuple[Any, dict]]], T],
             process_factory: Callable[..., Any] | None = None) -> T:
    """A command's jobs, one after another, in one measurement process: `steps(job)` calls `job(kind, params, what,
    on_progress=, on_samples=)` for each (as run_job's), which returns that job's (result, extra) or raises its
    JobError or MeasurementBug; what `steps` returns is returned once the process is stopped."""
    events: queue.Queue = queue.Queue()
    make = process_factory or MeasurementProcess
    process = make(on_event=events.put, output="stderr", restart=False)
    terminated = False  # by SIGTERM or SIGHUP: the process is killed at once, not asked to quit first

    def job(kind: str, params: dict, what: str = "", *, on_progress: Callable[[str, Any], None] | None = None,
            on_samples: Callable[[Samples], None] | None = None) -> tuple[Any, dict]:
        job_id = process.submit(kind, params, what or kind)
        try:
            end = _wait(events, job_id, on_progress, on_samples)
        except KeyboardInterrupt:
            end = _cancel(process, events, job_id)
            if isinstance(end, JobDone) and getattr(end.result, "cancelled", False):  # not one that ended first
                raise Interrupted(end.result, dict(end.extra or {})) from None
            raise
        if isinstance(end, JobFailed):
            if end.internal:
                raise MeasurementBug(end.error)
            raise JobError(end.error)
        return end.result, dict(end.extra or {})

    try:
        process.start()
        return steps(job)
    except Terminated:
        terminated = True
        raise
    finally:
        if terminated:
            process.stop(grace_s=0)
        else:
            process.stop()


def _wait(events: queue.Queue, job_id: int, on_progress, on_samples, deadline: float | None = None):
    """The job's final event, passing the others on; None when `deadline` (monotonic) passed first."""
    import time

    while True:
        timeout = POLL_S if deadline is None else min(POLL_S, deadline - time.monotonic())
        if timeout <= 0:
            return None
        try:
            event = events.get(timeout=timeout)
        except queue.Empty:
            continue
        if getattr(event, "job_id", None) != job_id:
            continue
        if isinstance(event, (JobDone, JobFailed)):
            return event
        if isinstance(event, Samples) and on_samples is not None:
            on_samples(event)
        elif isinstance(event, Progress) and on_progress is not None:
            on_progress(event.what, event.data)


def _cancel(process: Any, events: queue.Queue, job_id: int) -> Any:
    """Ctrl-C: cancel the job and give it CANCEL_GRACE_S to stop; then (stopped or not) the process goes at once.
    A second Ctrl-C while waiting ends the wait, and with it what the job would have kept. Returns the job's final
    event, None when it had none within the wait."""
    import time

    try:
        process.cancel(job_id, enforce=False)  # the kill below is the enforcement: no restart for the CLI
        return _wait(events, job_id, None, None, deadline=time.monotonic() + CANCEL_GRACE_S)
    except KeyboardInterrupt:
        return None
    finally:
        process.stop(grace_s=0)
