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
    first = jobs.start("throughput", {}, "first")
    second = jobs.start("throughput", {}, "second")
    assert session.cancelled == [(first, True)]
    assert not jobs.current(JobEvent("throughput", JobDone(first, "old result")))  # a slow answer: dropped
    assert jobs.current(JobEvent("throughput", Progress(second, "batch_try", None)))
    assert jobs.busy("throughput") and jobs.job_id("throughput") == second
    assert jobs.current(JobEvent("throughput", JobDone(second, "result")))
    assert not jobs.busy("throughput")  # the final answer frees the slot


def test_a_slot_is_its_kind_unless_two_kinds_take_turns_in_one():
    jobs, session = slots()
    kept = jobs.start("ceilings_kept", {}, "reading the kept ceilings", slot="ceilings", enforce_cancel=False)
    measured = jobs.start("ceilings", {}, "measuring the ceilings")
    assert session.cancelled == [(kept, True)] and jobs.job_id("ceilings") == measured
    assert not jobs.busy("ceilings_kept")


def test_slots_are_independent_and_an_analysis_is_replaced_without_being_killed():
    jobs, session = slots()
    run = jobs.start("time", {}, "run")
    jobs.start("roofline", {}, "roofline", enforce_cancel=False)
    jobs.start("roofline", {}, "roofline again", enforce_cancel=False)
    assert session.cancelled == [(2, False)]
    assert jobs.job_id("time") == run
    jobs.cancel("time")
    assert session.cancelled[-1] == (run, True) and not jobs.busy("time")
    assert not jobs.current(JobEvent("time", JobFailed(run, "cancelled", cancelled=True)))
