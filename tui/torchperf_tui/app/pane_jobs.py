"""How a pane owns its jobs in the measurement process: one slot per purpose (a pane's timing run, its
roofline, its check), each holding the id of the job that is current for it. Starting a job in a slot
replaces the one there (cancelled); an event of a job that is no longer current is dropped, so a slow
answer can never paint over a newer one. This replaces a sequence counter per job kind in the App.

A measurement's result that keeps what the app saw beside it (an `app_marks` list: a resize, heavy redraws) gets it
here, from the job's start to its answer, for every pane alike (app/runs.py's app_marks); the timing and compare
panes set it again from their first timed sample, which they see.
"""

from __future__ import annotations

import time
from typing import Any

from rich.markup import escape

from torchperf_tui.app.runs import app_marks
from torchperf_tui.wording.refusals import app_message
from torchperf_tui.measure.protocol import JobDone, JobFailed

# What a pane says of its job when a newer measurement cancelled it before it began.
REPLACED = "cancelled: another measurement replaced it"


class PaneJobs:
    """The jobs of one pane. Events reach the pane as JobEvent messages (app/messages.py) with the slot's
    name; `current(message)` says whether the pane should show it."""

    def __init__(self, owner) -> None:
        self.owner = owner  # the pane: its JobEvent messages are posted to it
        self._jobs: dict[str, int] = {}
        self._sent: dict[int, tuple[float, float]] = {}  # job id -> (monotonic s, this process's CPU s) when sent

    @property
    def session(self):
        return self.owner.app.session

    def start(self, kind: str, params: dict, what: str, *, slot: str | None = None, enforce_cancel: bool = True) -> int:
        """Send a job of `kind` to the measurement process, replacing the one in its slot: the kind's own, or `slot`
        where two kinds take turns in one (the Device pane's ceilings, read or measured)."""
        slot = slot or kind
        self.cancel(slot, enforce=enforce_cancel)
        disturbances = getattr(self.session, "disturbances", None)
        sent = (disturbances.now(), time.process_time()) if disturbances is not None else None
        job_id = self.session.submit(kind, params, what, self.owner, slot)
        self._jobs[slot] = job_id
        if sent is not None:
            self._sent[job_id] = sent
        return job_id

    def cancel(self, slot: str, enforce: bool = True) -> None:
        job_id = self._jobs.pop(slot, None)
        if job_id is not None:
            self._sent.pop(job_id, None)
            self.session.cancel(job_id, enforce=enforce)

    def busy(self, slot: str) -> bool:
        return slot in self._jobs

    def job_id(self, slot: str) -> int | None:
        """The slot's current job, None when it has none."""
        return self._jobs.get(slot)

    def cancelled_line(self, event: JobFailed) -> str:
        """What the pane says of its job cancelled before it began: the event's own words where `c` cancelled it,
        REPLACED where a newer measurement did."""
        return event.error if self.session.cancelled_by_key(event.job_id) else REPLACED

    def accept(self, message: Any) -> Any:
        """The message's event when its job is the slot's current one, else None (a replaced job's answer)."""
        return message.event if self.current(message) else None

    def answer(self, message: Any, on_failed) -> Any:
        """The message's event when its job is the slot's current one and did not fail (a Progress or a JobDone),
        else None. A failure goes to `on_failed(error)`; a job cancelled before it began is no failure: the pane's
        status line says it in cancelled_line's words."""
        event = self.accept(message)
        if not isinstance(event, JobFailed):
            return event
        if event.cancelled:
            self.owner.status = escape(self.cancelled_line(event))
        else:
            on_failed(event.error)
        return None

    def config(self, selection, on_error, flags: Any = None, slot: str | None = None):
        """The selection's BenchConfig (with `flags` for an arm), or None after `on_error(line)` when the engine
        refuses the input (a bad shape or batch); with `slot`, the job there is cancelled too, as the new
        request replaces it."""
        try:
            return selection.config(flags)
        except Exception as exc:
            if slot is not None:
                self.cancel(slot)
            on_error(app_message(exc))
            return None

    def current(self, message: Any) -> bool:
        """True when the message's job is the slot's current one; a final event frees the slot."""
        event = message.event
        if self._jobs.get(message.slot) != event.job_id:
            return False
        if isinstance(event, (JobDone, JobFailed)):
            del self._jobs[message.slot]
            sent = self._sent.pop(event.job_id, None)
            if isinstance(event, JobDone) and sent is not None:
                self._mark(event.result, sent)
        return True

    def _mark(self, result: Any, sent: tuple[float, float]) -> None:
        """What the app saw beside the job goes on its result, when the result keeps it (a measurement's)."""
        if isinstance(getattr(result, "app_marks", None), list):
            result.app_marks = app_marks(self.session.disturbances, sent[0], sent, result)
