"""Ctrl-C during a CLI job (measure/cli_jobs.py): the job is cancelled and waited for; what it kept, a result marked
cancelled, goes up with the interrupt (Interrupted) for the command to show; a result that was not cut short, or no
result, leaves a plain KeyboardInterrupt."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from torchperf_tui.measure import cli_jobs
from torchperf_tui.measure.protocol import JobDone, JobFailed, Progress


class FakeProcess:
    """Answers a job with one Progress, and a cancel with `on_cancel(job_id)` (the job's final event, or None)."""

    def __init__(self, on_cancel, on_event, **_options) -> None:
        self.on_cancel, self.on_event = on_cancel, on_event

    def start(self) -> None:
        pass

    def submit(self, kind, params, what) -> int:
        self.on_event(Progress(7, "batch_try", None))
        return 7

    def cancel(self, job_id, enforce=True) -> None:
        final = self.on_cancel(job_id)
        if final is not None:
            self.on_event(final)

    def stop(self, grace_s=None) -> None:
        pass


def interrupted_job(on_cancel):
    """The job run as a command runs it, Ctrl-C arriving as its first progress is handed on."""

    def ctrl_c(what, data):
        raise KeyboardInterrupt

    factory = lambda **options: FakeProcess(on_cancel, **options)  # noqa: E731
    return cli_jobs.run_job("throughput", {}, on_progress=ctrl_c, process_factory=factory)


def test_a_result_the_cancel_cut_short_goes_up_with_the_interrupt():
    partial = SimpleNamespace(cancelled=True, tries=[1, 2])
    with pytest.raises(cli_jobs.Interrupted) as caught:
        interrupted_job(lambda job_id: JobDone(job_id, partial, {"fingerprint": "f"}))
    assert caught.value.result is partial and caught.value.extra == {"fingerprint": "f"}


@pytest.mark.parametrize("final", [
    lambda job_id: JobDone(job_id, SimpleNamespace(cancelled=False)),  # it had ended whole as Ctrl-C came
    lambda job_id: JobDone(job_id, None),
    lambda job_id: JobFailed(job_id, "cancelled", cancelled=True),  # cancelled before it began
], ids=["ended-whole", "no-result", "failed"])
def test_anything_else_is_a_plain_interrupt(final):
    with pytest.raises(KeyboardInterrupt) as caught:
        interrupted_job(final)
    assert not isinstance(caught.value, cli_jobs.Interrupted)
