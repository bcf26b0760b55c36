"""What a measurement client reports to a test: its events and notices, kept in order, with a wait for either."""

from __future__ import annotations

import threading
import time

from torchperf_tui.measure.protocol import JobDone, JobFailed


class Recorder:
    """The client's on_event and on_notice; `wait_for(predicate)` until what arrived satisfies it."""

    def __init__(self) -> None:
        self.events: list = []
        self.notices: list[str] = []
        self.changed = threading.Condition()

    def on_event(self, event) -> None:
        with self.changed:
            self.events.append(event)
            self.changed.notify_all()

    def on_notice(self, text: str) -> None:
        with self.changed:
            self.notices.append(text)
            self.changed.notify_all()

    def wait_for(self, predicate, timeout: float = 60.0):
        deadline = time.monotonic() + timeout
        with self.changed:
            while not predicate():
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"timed out; events: {[type(e).__name__ for e in self.events]}, "
                                         f"notices: {self.notices}")
                self.changed.wait(left)

    def end_of(self, job_id: int):
        """The job's JobDone or JobFailed, or None while it has not ended."""
        for event in self.events:
            if isinstance(event, (JobDone, JobFailed)) and event.job_id == job_id:
                return event
        return None

    def ended(self, job_id: int, timeout: float = 120.0):
        """The job's end, waited for."""
        self.wait_for(lambda: self.end_of(job_id) is not None, timeout)
        return self.end_of(job_id)
