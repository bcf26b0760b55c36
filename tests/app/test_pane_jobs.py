"""A pane's job slots: a job started in a slot replaces the one there, whose answers are then dropped."""

from __future__ import annotations

from types import SimpleNamespace

from torchperf_tui.app.pane_jobs import PaneJobs
from torchperf_tui.app.messages import JobEvent
from torchperf_tui.measure.protocol import JobDone, JobFailed, Progress


class FakeSession:
    def __init__(self) -> None:
        self.submitted: list[tuple] = []
        self.cancelled: list[tuple[int, bool]] = []

    def submit(self, kind, params, what, owner, slot) -> int:
        self.submitted.append((kind, slot))
        return len(self.submitted)

    def cancel(self, job_id: int, enforce: bool = True) -> None:
        self.cancelled.append((job_id, enforce))


def slots():
    session = FakeSession()
    return PaneJobs(SimpleNamespace(app=SimpleNamespace(session=session))), session


def test_a_new_job_in_a_slot_cancels_the_old_one_and_only_the_new_ones_answers_count():
    jobs, session = slots()
    first = jobs.start("search", "throughput", {}, "first")
    second = jobs.start("search", "throughput", {}, "second")
    assert session.cancelled == [(first, True)]
    assert not jobs.current(JobEvent("search", JobDone(first, "old result")))  # a slow answer: dropped
    assert jobs.current(JobEvent("search", Progress(second, "batch_try", None)))
    assert jobs.busy("search") and jobs.job_id("search") == second
    assert jobs.current(JobEvent("search", JobDone(second, "result")))
    assert not jobs.busy("search")  # the final answer frees the slot


def test_slots_are_independent_and_an_analysis_is_replaced_without_being_killed():
    jobs, session = slots()
    run = jobs.start("run", "time", {}, "run")
    jobs.start("roofline", "roofline", {}, "roofline", enforce_cancel=False)
    jobs.start("roofline", "roofline", {}, "roofline again", enforce_cancel=False)
    assert session.cancelled == [(2, False)]
    assert jobs.job_id("run") == run
    jobs.cancel("run")
    assert session.cancelled[-1] == (run, True) and not jobs.busy("run")
    assert not jobs.current(JobEvent("run", JobFailed(run, "cancelled", cancelled=True)))
