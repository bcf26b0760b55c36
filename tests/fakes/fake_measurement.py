"""A measurement process for the app's tests: `TorchperfApp(measurement=FakeMeasurement(...))`.

It answers each job of a recorded kind with its recorded result, as the real process would (Started, the
recorded Progress events, then JobDone), and hands every other job to a real measurement process when it is
given one (`real=MeasurementProcess`: the model catalogue and analyses stay real), else fails it with one line.
The app cannot tell: it talks to it through the client's methods (start, stop, submit, cancel, pending) and
reads its answers as MeasurementEvent messages. Every request is kept in `requests` (kind, params).
"""

from __future__ import annotations

import itertools
import os
import threading
from dataclasses import dataclass, field
from typing import Any, Callable

from torchperf_tui.measure.protocol import JobDone, JobFailed, Progress, Ready, Started


@dataclass
class Recorded:
    """A job's recorded answer: `progress` as (what, data) pairs before the result, `extra` beside it."""

    result: Any
    progress: tuple = ()
    extra: dict = field(default_factory=dict)


class FakeMeasurement:
    """`answers`: kind -> Recorded, a result, or a callable(params) giving either. `real`: a client factory
    (measure/client.py's MeasurementProcess) for the kinds not recorded; None: those fail."""

    def __init__(self, answers: dict[str, Any] | None = None, real: Callable[..., Any] | None = None) -> None:
        self.answers = dict(answers or {})
        self.real_factory = real
        self.real: Any = None
        self.requests: list[tuple[str, dict]] = []
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
        if kind not in self.answers and self.real is not None:
            return self.real.submit(kind, params, what)
        job_id = next(self._ids)
        self.on_event(Started(job_id))
        answer = self.answers.get(kind)
        if answer is None:
            self.on_event(JobFailed(job_id, f"no recorded answer for a {kind} job"))
            return job_id
        if callable(answer) and not isinstance(answer, Recorded):
            answer = answer(params)
        if not isinstance(answer, Recorded):
            answer = Recorded(answer)
        for what_, data in answer.progress:
            self.on_event(Progress(job_id, what_, data))
        self.on_event(JobDone(job_id, answer.result, dict(answer.extra)))
        return job_id

    def cancel(self, job_id: int, grace_s: float | None = None, enforce: bool = True) -> None:
        if job_id > 0 and self.real is not None:  # a recorded job is answered the moment it is asked
            self.real.cancel(job_id, enforce=enforce)

    def pending(self, kinds: Any = None) -> list:
        return self.real.pending(kinds) if self.real is not None else []

    def kinds_asked(self) -> list[str]:
        """The kinds of the jobs asked for so far, in order."""
        with self._lock:
            return [kind for kind, _ in self.requests]
