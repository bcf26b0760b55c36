"""One warm measurement process per test worker, lent to one app at a time.

An app test that needs a real answer from the measurement process (the catalogue, a model's analysis, a real run)
but does not test the process itself need not pay for a process of its own: a start, torch's import and the
catalogue's listing, several seconds each on a busy box. `SharedMeasurement` is a client factory as the app takes
one (`measurement(on_event=, on_notice=, cpus=)`, app/session.py): the first app to start it starts the real
process (measure/client.py's MeasurementProcess); every later app finds it warm and hears its Ready at once.

Between two apps it is reset: as an app stops, every job it asked for is cancelled (killed with the process past
its grace, as the client does for any cancel) and waited for, so the next app finds the process idle, and what
those jobs still send is dropped, never handed to the next app. Each job runs from the process's pristine torch
state as it always does (measure/process.py). What is not reset is what a process keeps for its life: the model
modules it has imported, the environment it was started with (the deadlines; a job carries the files it reads,
measure/protocol.py), its working directory, its pid and its CPUs. A test that depends on any of those, or on the
process's start, death or restart, keeps a process of its own (the `own_process` mark, tests/conftest.py). The CLI's
tests share one too (`for_cli`).
"""

from __future__ import annotations

import threading
import time
from typing import Any, Callable

from torchperf_tui.measure.client import MeasurementProcess
from torchperf_tui.measure.protocol import Ready

# How long an app's stop waits for its cancelled jobs to end: a job past its grace is killed with the process
# (measure/client.py) and the process started again; past this the process is let go and the next app starts one.
SETTLE_S = 60.0


class SharedMeasurement:
    """A client factory whose every call lends the same measurement process to a new app (a Lease)."""

    def __init__(self, factory: Callable[..., Any] = MeasurementProcess) -> None:
        self.factory = factory
        self.client: Any = None
        self.pid: int | None = None  # of the process now serving, once it said Ready
        self.lease: Lease | None = None
        self.retired: set[int] = set()  # jobs of apps that have stopped: what they still send is dropped
        self.lock = threading.Lock()

    def __call__(self, on_event: Callable[[Any], None], on_notice: Callable[[str], None] | None = None,
                 cpus: Any = None) -> "Lease":
        return Lease(self, on_event, on_notice or (lambda text: None), cpus)

    def for_cli(self, on_event: Callable[[Any], None], output: str = "stderr", restart: bool = False,
                **options: Any) -> Any:
        """As measure/cli_jobs.py makes a command's process (`make(on_event=, output=, restart=)`): a lease of the
        shared one. Where the command's set-up is not the shared process's (its deadlines, read from the
        environment as a client starts; other options), the command gets a process of its own, as it would."""
        from torchperf_tui.core.errors import TorchperfError
        from torchperf_tui.measure.deadlines import Deadlines

        try:
            deadlines = Deadlines.from_env()
        except TorchperfError:
            deadlines = None  # a bad value: the real client's own line, from a process of its own
        with self.lock:
            started = self.client.deadlines if self.client is not None else None
        if options or output != "stderr" or deadlines is None or (started is not None and deadlines != started):
            return MeasurementProcess(on_event=on_event, output=output, restart=restart, **options)
        return Lease(self, on_event, lambda text: None, None)

    # -- what the process says, to the app it is lent to --------------------------------------------------
    def _event(self, event: Any) -> None:
        with self.lock:
            if isinstance(event, Ready):
                self.pid = event.pid
            lease = self.lease
            dropped = getattr(event, "job_id", None) in self.retired
        if lease is not None and not dropped:
            lease.on_event(event)

    def _notice(self, text: str) -> None:
        with self.lock:
            lease = self.lease
        if lease is not None:
            lease.on_notice(text)

    def close(self) -> None:
        """Stop the process (the end of the test session)."""
        client, self.client = self.client, None
        if client is not None:
            client.stop()


class Lease:
    """The shared process as one app's client: start, stop, submit, cancel and pending, as MeasurementProcess."""

    def __init__(self, shared: SharedMeasurement, on_event: Callable[[Any], None],
                 on_notice: Callable[[str], None], cpus: Any) -> None:
        self.shared, self.on_event, self.on_notice, self.cpus = shared, on_event, on_notice, cpus
        self.jobs: set[int] = set()

    def start(self) -> None:
        shared = self.shared
        with shared.lock:
            shared.lease = self
            pid = shared.pid if shared.client is not None else None
            fresh = shared.client is None
            if fresh:
                shared.client = shared.factory(on_event=shared._event, on_notice=shared._notice, cpus=self.cpus)
        if fresh:
            shared.client.start()  # its Ready reaches this app through _event
        elif pid is not None:
            self.on_event(Ready(pid))  # warm: ready now (a Ready still to come reaches this app through _event)

    def stop(self, grace_s: float | None = None) -> None:
        """This app is done with the process: its jobs are cancelled and waited for, and the process stays
        (`grace_s`, the client's, is not used: a job that does not settle is killed with the process)."""
        shared = self.shared
        with shared.lock:
            if shared.lease is self:
                shared.lease = None
            client = shared.client
            shared.retired |= self.jobs
        if client is None:
            return
        for info in client.pending():
            if info.job_id in self.jobs:
                client.cancel(info.job_id)
        deadline = time.monotonic() + SETTLE_S
        while any(info.job_id in self.jobs for info in client.pending()):
            if time.monotonic() > deadline:  # not settled: the next app gets a process of its own
                with shared.lock:
                    shared.client, shared.pid = None, None
                client.stop(grace_s=0)
                return
            time.sleep(0.05)

    def submit(self, kind: str, params: dict | None = None, what: str = "") -> int:
        with self.shared.lock:
            client = self.shared.client
        job_id = client.submit(kind, params, what)
        self.jobs.add(job_id)
        return job_id

    def cancel(self, job_id: int, grace_s: float | None = None, enforce: bool = True) -> None:
        self.shared.client.cancel(job_id, grace_s, enforce)

    def pending(self, kinds: Any = None) -> list:
        client = self.shared.client
        if client is None:
            return []
        return [info for info in client.pending(kinds) if info.job_id in self.jobs]
