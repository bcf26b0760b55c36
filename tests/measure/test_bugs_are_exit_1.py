"""A failure that is this tool's bug, not the user's input, is marked internal by the measurement process and its
client, so the CLI says it as an internal error with exit 1 (the README's promise), never as bad input (exit 2)."""

from __future__ import annotations

import threading

import pytest

from tests.measure.in_process import InProcessMeasurement
from tests.test_cli import TINY, run
from torchperf_tui.measure import cli_jobs, runners
from torchperf_tui.measure.client import JobInfo, MeasurementProcess


@pytest.fixture
def in_process(monkeypatch):
    monkeypatch.setattr(cli_jobs, "MeasurementProcess", InProcessMeasurement)


def test_a_result_that_cannot_be_pickled_is_a_bug_exit_1(capsys, monkeypatch, in_process):
    monkeypatch.setitem(runners.RUNNERS, "cli.flops", lambda params, ctx: (threading.Lock(), {}))
    code, out, err = run(capsys, "flops", TINY, "--input", "1x3x8x8")
    assert code == 1 and out == "" and err.count("\n") == 1, err
    assert "internal error" in err and "its result could not be sent" in err


def test_an_unknown_job_kind_is_a_bug():
    with pytest.raises(cli_jobs.MeasurementBug, match="unknown job kind 'no.such.kind'"):
        cli_jobs.run_job("no.such.kind", {}, process_factory=InProcessMeasurement)


def test_a_message_this_process_cannot_read_fails_the_running_job_as_a_bug():
    events: list = []
    client = MeasurementProcess(events.append)
    client._jobs[7] = JobInfo(7, "time", {}, "timing x", running=True)
    client._fail_running("the measurement process sent what this process cannot read: ProtocolError: x",
                         client._generation)
    assert len(events) == 1 and events[0].job_id == 7 and events[0].internal
