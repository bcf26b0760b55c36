"""A failure that is this tool's bug, not the user's input, is marked internal by the measurement process and its
client, so the CLI says it as an internal error with exit 1 (the README's promise), never as bad input (exit 2)."""

from __future__ import annotations

import dataclasses
import threading

import pytest

from tests.measure.in_process import InProcessMeasurement
from tests.test_cli import TINY, run
from torchperf_tui.measure import cli_jobs, jobs
from torchperf_tui.measure.client import MeasurementProcess


@pytest.fixture
def in_process(monkeypatch):
    monkeypatch.setattr(cli_jobs, "MeasurementProcess", InProcessMeasurement)


def unpicklable_job(params, ctx):
    """A runner whose result cannot cross the pipe."""
    return threading.Lock(), {}


def test_a_result_that_cannot_be_pickled_is_a_bug_exit_1(capsys, monkeypatch, in_process):
    runner = f"{__name__}:unpicklable_job"
    monkeypatch.setitem(jobs.KINDS, "analyse", dataclasses.replace(jobs.KINDS["analyse"], runner=runner))
    code, out, err = run(capsys, "flops", TINY, "--input", "1x3x8x8")
    assert code == 1 and out == "" and err.count("\n") == 1, err
    assert "internal error" in err and "its result could not be sent" in err


def test_an_unknown_job_kind_is_a_bug():
    with pytest.raises(cli_jobs.MeasurementBug, match="unknown job kind 'no.such.kind'"):
        cli_jobs.run_job("no.such.kind", {}, process_factory=InProcessMeasurement)


class UnreadablePeer:
    """A measurement process on the other end of the client's pipe (measure/spawn.py's seam) that says Ready, starts
    the first job it is asked for, then sends bytes that do not unpickle; it ends when asked to quit or killed."""

    pid = 4242
    returncode = 0

    def __init__(self, conn) -> None:
        self.conn = conn
        self.gone = threading.Event()
        threading.Thread(target=self.serve, daemon=True).start()

    def serve(self) -> None:
        from torchperf_tui.measure.protocol import Quit, Ready, StartJob, Started, pack, unpack

        self.conn.send(pack(Ready(self.pid)))
        try:
            while True:
                message = unpack(self.conn.recv())
                if isinstance(message, StartJob):
                    self.conn.send(pack(Started(message.job_id)))
                    self.conn.send_bytes(b"not a pickle")
                elif isinstance(message, Quit):
                    break
        except (EOFError, OSError):
            pass
        finally:
            self.conn.close()
            self.gone.set()

    def wait(self, timeout=None):
        if not self.gone.wait(timeout):
            import subprocess

            raise subprocess.TimeoutExpired("unreadable peer", timeout)
        return self.returncode

    def poll(self):
        return self.returncode if self.gone.is_set() else None

    def kill(self) -> None:
        self.conn.close()
        self.gone.set()


def test_a_message_this_process_cannot_read_fails_the_running_job_as_a_bug(monkeypatch):
    import socket
    from multiprocessing.connection import Connection

    from torchperf_tui.measure.protocol import JobFailed

    def spawn(log_template, cpus, prints_to_stderr):
        ours, theirs = socket.socketpair()
        return UnreadablePeer(Connection(theirs.detach())), Connection(ours.detach()), None

    monkeypatch.setattr("torchperf_tui.measure.client.spawn", spawn)
    events: list = []
    failed = threading.Event()
    client = MeasurementProcess(lambda event: events.append(event) or isinstance(event, JobFailed) and failed.set(),
                                restart=False)
    client.start()
    try:
        job_id = client.submit("time", {}, "timing x")
        assert failed.wait(30), events
    finally:
        client.stop()
    (failure,) = [event for event in events if isinstance(event, JobFailed)]
    assert failure.job_id == job_id and failure.internal, failure
    assert "the measurement process sent what this process cannot read" in failure.error
    assert client.pending() == []  # the job is forgotten, not left waiting for an answer that cannot come
