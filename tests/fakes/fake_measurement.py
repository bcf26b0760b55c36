"""A measurement process for the app's tests: `TorchperfApp(measurement=FakeMeasurement(...))`.

It answers each job of a recorded kind with its recorded result, as the real process would (Started, the
recorded Samples and Progress events, then JobDone, or JobFailed for a recorded failure), and hands every other
job to a real measurement process when it is given one (`real=MeasurementProcess`: the model catalogue and
analyses stay real), else fails it with one line. The one rule of the machine holds across the two: a recorded
measuring job cancels the real process's measuring jobs, as the real client's submit does. The app cannot tell:
it talks to it through the client's methods (start, stop, submit, cancel, pending) and reads its answers as
MeasurementEvent messages. Every request is kept in `requests` (kind, params).
"""

from __future__ import annotations

import itertools
import os
import threading
from dataclasses import dataclass, field
from typing import Any, Callable

from torchperf_tui.measure.client import JobInfo
from torchperf_tui.measure.jobs import measuring_kinds
from torchperf_tui.measure.protocol import JobDone, JobFailed, Progress, Ready, Samples, Started

HELD = object()  # a Recorded result: the job streams its events, then runs on (pending) until it is cancelled


@dataclass
class Recorded:
    """A job's recorded answer: `samples` as (phase, index, total, samples_ms, first_seen) batches and `progress`
    as (what, data) pairs before the result, `extra` beside it. `result=HELD`: no result; the job stays pending
    until cancelled (a long run caught in flight)."""

    result: Any
    progress: tuple = ()
    extra: dict = field(default_factory=dict)
    samples: tuple = ()


@dataclass(frozen=True)
class Failed:
    """A job's recorded failure: the one line the measurement process would send (JobFailed)."""

    error: str
    cancelled: bool = False


class FakeMeasurement:
    """`answers`: kind -> Recorded, Failed, a result, or a callable(params) giving one of them. `real`: a client
    factory (measure/client.py's MeasurementProcess) for the kinds not recorded; None: those fail."""

    def __init__(self, answers: dict[str, Any] | None = None, real: Callable[..., Any] | None = None) -> None:
        self.answers = dict(answers or {})
        self.real_factory = real
        self.real: Any = None
        self.requests: list[tuple[str, dict]] = []
        self.held: dict[int, JobInfo] = {}  # recorded jobs that run on until cancelled (Recorded(HELD))
        self.on_event: Callable[[Any], None] = lambda event: None
        self._ids = itertools.count(-1, -1)  # never an id of the real process's (those count up from 1)
        self._lock = threading.Lock()

    # -- the factory the app calls (Session.start) -------------------------------------------------------
    def __call__(self, on_event: Callable[[Any], None], on_notice: Callable[[str], None] | None = None,
                 cpus: Any = None) -> "FakeMeasurement":
        self.on_event = on_event
        if self.real_factory is not None:
            self.real = self.real_factory(on_event=on_event, on_notice=on_notice, cpus=cpus)
        return self

    # -- the client's methods -------------------------------------------------------------------------
    def start(self) -> None:
        if self.real is not None:
            self.real.start()  # its Ready carries the real process's pid
        else:
            self.on_event(Ready(os.getpid()))

    def stop(self) -> None:
        if self.real is not None:
            self.real.stop()

    def submit(self, kind: str, params: dict | None = None, what: str = "") -> int:
        params = dict(params or {})
        with self._lock:
            self.requests.append((kind, params))
        measuring = measuring_kinds()
        if kind not in self.answers and self.real is not None:
            if kind in measuring:
                self._cancel_held()
            return self.real.submit(kind, params, what)
        if kind in measuring:  # one measurement on the machine at a time, as the real client keeps it
            self._cancel_held()
            for other in self.real.pending(measuring) if self.real is not None else []:
                self.real.cancel(other.job_id)
        job_id = next(self._ids)
        self.on_event(Started(job_id))
        answer = self.answers.get(kind)
        if answer is None:
            self.on_event(JobFailed(job_id, f"no recorded answer for a {kind} job"))
            return job_id
        if callable(answer) and not isinstance(answer, (Recorded, Failed)):
            answer = answer(params)
        if isinstance(answer, Failed):
            self.on_event(JobFailed(job_id, answer.error, cancelled=answer.cancelled))
            return job_id
        if not isinstance(answer, Recorded):
            answer = Recorded(answer)
        for batch in answer.samples:  # a timed batch says of each sample whether its shape was new, as there
            phase, index, total, samples_ms = batch[:4]
            first_seen = tuple(batch[4]) if len(batch) > 4 else (False,) * len(samples_ms) if phase == "timed" else ()
            self.on_event(Samples(job_id, phase, index, total, tuple(samples_ms), first_seen))
        for what_, data in answer.progress:
            self.on_event(Progress(job_id, what_, data))
        if answer.result is HELD:
            with self._lock:
                self.held[job_id] = JobInfo(job_id, kind, params, what or kind, running=True, iterating=True)
            return job_id
        self.on_event(JobDone(job_id, answer.result, dict(answer.extra)))
        return job_id

    def cancel(self, job_id: int, grace_s: float | None = None, enforce: bool = True) -> None:
        if job_id > 0 and self.real is not None:  # a recorded job is answered the moment it is asked
            self.real.cancel(job_id, enforce=enforce)
        with self._lock:
            held = self.held.pop(job_id, None)
        if held is not None:  # it stops at its next iteration, as a real one does
            self.on_event(JobFailed(job_id, "cancelled", cancelled=True))

    def _cancel_held(self) -> None:
        for job_id in list(self.held):
            self.cancel(job_id)

    def pending(self, kinds: Any = None) -> list:
        with self._lock:
            held = [info for info in self.held.values() if kinds is None or info.kind in kinds]
        return held + (self.real.pending(kinds) if self.real is not None else [])

    def kinds_asked(self) -> list[str]:
        """The kinds of the jobs asked for so far, in order."""
        with self._lock:
            return [kind for kind, _ in self.requests]
