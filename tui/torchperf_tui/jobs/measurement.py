"""The UI process's handle on the measurement process: start it, send it jobs, cancel them, survive its death.

No torch, no Textual. Events from the process reach `on_event` on a reader thread (the app posts them to
itself as messages). If the process dies (a segfault in an extension, the OOM killer, `os._exit` in a
model), the job it was running fails with a line that says what died and during what, queued jobs go to
a fresh process, and the next request works. A cancel that is not answered within CANCEL_GRACE_S (a
forward pass stuck in C++ cannot be interrupted) kills the process and starts a new one, and says so.
"""

from __future__ import annotations

import io
import itertools
import os
import pickle
import queue
import signal
import tempfile
import threading
from dataclasses import dataclass
from typing import Any, Callable

from torchperf_tui.worker.protocol import (CancelJob, JobDone, JobFailed, ProtocolError, Quit, Ready, StartJob,
                                           Started, pack, unpack)

CANCEL_GRACE_S = 2.0


@dataclass
class JobInfo:
    job_id: int
    kind: str
    params: dict
    what: str  # "timing resnet18 at 1x3x224x224": for the line that says what a crash interrupted
    running: bool = False
    cancel_sent_at: float | None = None


class _UiUnpickler(pickle.Unpickler):
    """Unpickles events, refusing any torch class: the UI process must never import torch, and a result that
    carries a torch object (a TorchVersion, a torch.Size) is a bug to see, not to paper over."""

    def find_class(self, module: str, name: str) -> Any:
        if module == "torch" or module.startswith("torch."):
            raise ProtocolError(f"a torch object ({module}.{name}) in an event: the UI process does not load torch")
        return super().find_class(module, name)


def describe_exit(exitcode: int | None) -> str:
    """'was killed (SIGKILL)', 'exited with code 3'."""
    if exitcode is None:
        return "stopped answering"
    if exitcode < 0:
        try:
            name = signal.Signals(-exitcode).name
        except ValueError:
            name = f"signal {-exitcode}"
        return f"was killed ({name})"
    return f"exited with code {exitcode}"


def default_log_path() -> str:
    folder = os.path.join(tempfile.gettempdir(), "torchperf-tui")
    os.makedirs(folder, exist_ok=True)
    return os.path.join(folder, f"measurement-{os.getpid()}.log")


class MeasurementProcess:
    """One measurement process at a time; replaced when it dies or must be killed."""

    def __init__(self, on_event: Callable[[Any], None], on_notice: Callable[[str], None] | None = None,
                 log_path: str | None = None) -> None:
        self.on_event = on_event
        self.on_notice = on_notice or (lambda text: None)
        self.log_path = log_path or default_log_path()
        self.pid: int | None = None  # of the process now serving, once it said Ready
        self._ids = itertools.count(1)
        self._lock = threading.RLock()
        self._jobs: dict[int, JobInfo] = {}
        self._process: Any = None
        self._conn: Any = None
        self._outbox: queue.Queue | None = None
        self._generation = 0
        self._stopping = False
        self._ready = False

    # -- life cycle ------------------------------------------------------------------------------------
    def start(self) -> None:
        """Start a measurement process (a new interpreter running torchperf_tui.worker) and the threads that
        talk to it; jobs still waiting from a process that went are sent to this one."""
        import socket
        import subprocess
        import sys
        from multiprocessing.connection import Connection

        with self._lock:
            self._generation += 1
            generation = self._generation
            ours, theirs = socket.socketpair()
            env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
            process = subprocess.Popen([sys.executable, "-m", "torchperf_tui.worker", str(theirs.fileno()),
                                        self.log_path], pass_fds=(theirs.fileno(),), stdin=subprocess.DEVNULL,
                                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env,
                                       close_fds=True)
            theirs.close()
            conn = Connection(ours.detach())
            self._process, self._conn, self.pid, self._ready = process, conn, None, False
            self._outbox = queue.Queue()
            threading.Thread(target=self._write, args=(generation, conn, self._outbox), name="measure-out",
                             daemon=True).start()
            threading.Thread(target=self._read, args=(generation, conn, process), name="measure-in",
                             daemon=True).start()
            for job in self._jobs.values():  # jobs that were waiting when the old process went
                job.running = False
                self._outbox.put(StartJob(job.job_id, job.kind, job.params))

    def stop(self) -> None:
        """Ask the process to finish; kill it if it has not within a second or two."""
        with self._lock:
            self._stopping = True
            process, outbox = self._process, self._outbox
        if process is None:
            return
        if outbox is not None:
            outbox.put(Quit())
        try:
            process.wait(timeout=1.5)
        except Exception:  # subprocess.TimeoutExpired: stuck in native code
            process.kill()
            process.wait(timeout=2)

    @property
    def alive(self) -> bool:
        return self._process is not None and self._process.poll() is None

    # -- jobs --------------------------------------------------------------------------------------------
    def submit(self, kind: str, params: dict | None = None, what: str = "") -> int:
        job_id = next(self._ids)
        with self._lock:
            info = JobInfo(job_id, kind, dict(params or {}), what or kind)
            self._jobs[job_id] = info
            if self._outbox is not None:
                self._outbox.put(StartJob(job_id, kind, info.params))
        return job_id

    def cancel(self, job_id: int, grace_s: float = CANCEL_GRACE_S) -> None:
        """Stop a job at its next iteration; if it is still running `grace_s` later, kill the process."""
        with self._lock:
            info = self._jobs.get(job_id)
            if info is None or self._outbox is None:
                return
            self._outbox.put(CancelJob(job_id))
            if info.cancel_sent_at is not None:
                return
            import time

            info.cancel_sent_at = time.monotonic()
            generation = self._generation
        timer = threading.Timer(grace_s, self._enforce_cancel, args=(job_id, generation))
        timer.daemon = True
        timer.start()

    def pending(self, kinds: frozenset[str] | set[str] | None = None) -> list[JobInfo]:
        with self._lock:
            return [j for j in self._jobs.values() if kinds is None or j.kind in kinds]

    def _enforce_cancel(self, job_id: int, generation: int) -> None:
        with self._lock:
            info = self._jobs.get(job_id)
            if info is None or generation != self._generation or not info.running:
                return  # it stopped in time (or never started, or the process was replaced meanwhile)
            process = self._process
        self._replace(process, f"the measurement process did not stop {info.what} within "
                               f"{CANCEL_GRACE_S:.0f} s of the cancel (stuck in native code): killed it and "
                               "started a new one", job_id)

    # -- the pipe ----------------------------------------------------------------------------------------
    def _write(self, generation: int, conn: Any, outbox: queue.Queue) -> None:
        while True:
            message = outbox.get()
            if generation != self._generation and not isinstance(message, Quit):
                return
            try:
                conn.send(pack(message))
            except (OSError, EOFError, BrokenPipeError, ValueError):
                return  # the reader sees the death and reports it
            if isinstance(message, Quit):
                return

    def _read(self, generation: int, conn: Any, process: Any) -> None:
        while True:
            try:
                message = unpack(_UiUnpickler(io.BytesIO(conn.recv_bytes())).load())
            except (EOFError, OSError):
                break
            except ProtocolError as exc:
                self.on_notice(f"measurement process: {exc}")
                continue
            except Exception as exc:  # a result that does not unpickle here: a bug, said in one line
                self.on_notice(f"measurement process sent what the app cannot read: {type(exc).__name__}: {exc}")
                continue
            with self._lock:
                if generation != self._generation:
                    return
                if isinstance(message, Ready):
                    self.pid, self._ready = message.pid, True
                elif isinstance(message, Started):
                    info = self._jobs.get(message.job_id)
                    if info is not None:
                        info.running = True
                elif isinstance(message, (JobDone, JobFailed)):
                    self._jobs.pop(message.job_id, None)
            self.on_event(message)
        try:
            process.wait(timeout=5)
        except Exception:
            pass
        with self._lock:
            if generation != self._generation or self._stopping:
                return
        self._replace(process, None, None)

    def _replace(self, process: Any, reason: str | None, job_id: int | None) -> None:
        """The process died (reason None: say how) or must go (kill it): fail the job it was running, start a
        fresh process for the queued ones, and say what happened. A process that died before it was ready
        (torch failed to import) is not restarted: that would only fail again."""
        with self._lock:
            if process is not self._process or self._stopping:
                return
            if process.poll() is None:
                process.kill()
                process.wait(timeout=5)
            running = [j for j in self._jobs.values() if j.running]
            if reason is None:
                during = f" while {running[0].what}" if running else ""
                reason = f"the measurement process {describe_exit(process.returncode)}{during}"
            failed = [self._jobs.pop(j.job_id) for j in running]
            if self._ready:
                reason += f"; started a new one (its log: {self.log_path})"
                self.start()
            else:
                reason += f" before it was ready: measurements are not available (its log: {self.log_path})"
                failed += list(self._jobs.values())
                self._jobs.clear()
                self._process = None
                self._outbox = None
        for job in failed:
            self.on_event(JobFailed(job.job_id, reason))
        self.on_notice(reason)
