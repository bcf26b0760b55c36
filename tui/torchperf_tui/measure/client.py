"""The UI process's handle on the measurement process: start it, send it jobs, cancel them, survive its death.

No torch, no Textual. Events from the process reach `on_event` on a reader thread (the app posts them to
itself as messages). If the process dies (a segfault in an extension, the OOM killer, `os._exit` in a
model), the job it was running fails with a line that says what died and during what (the phase the process
announced: the import of the model's module, its build or a pass), queued jobs go to a fresh process, and the next
request works. A cancelled job that has not stopped within CANCEL_GRACE_S once it iterates, BUILD_GRACE_S
before (a build or a forward pass stuck in C++ or in a sleep cannot be interrupted) is killed with its
process, which is started again, and that is said: at once when the cancel is enforced, else as soon as another job waits behind it.
A running job silent past its deadline (measure/deadlines.py: a model blocked in its build or in a pass) is killed
the same way, with a line that says which part of it did not finish and within how long. The CLI uses
the same client with restart=False and the model's prints on its own stderr, the process's stderr in its log
(measure/cli_jobs.py).
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
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from torchperf_tui.core.errors import TorchperfError
from torchperf_tui.core.kept_files import files_environ
from torchperf_tui.measure.deadlines import Deadlines, Watchdog, first_overdue, overdue_line
from torchperf_tui.measure.process import remove_if_empty
from torchperf_tui.measure.jobs import measuring_kinds
from torchperf_tui.measure.protocol import (ALIVE, NOTE, PHASE, CancelJob, JobDone, JobFailed, Progress, ProtocolError,
                                           Quit, Ready, Samples, StartJob, Started, pack, unpack)
from torchperf_tui.measure.spawn import spawn

# A cancelled job must stop within these, or it is killed with its process (the README promises both numbers):
# CANCEL_GRACE_S once it iterates (it has streamed samples or progress: it checks its cancel flag between
# iterations), BUILD_GRACE_S before (a build, a model analysis, a compile, a roofline or determinism check has
# no cancel point and takes seconds for a big model: a healthy one must not be killed for it).
CANCEL_GRACE_S = 2.0
BUILD_GRACE_S = 10.0


@dataclass
class JobInfo:
    job_id: int
    kind: str
    params: dict
    what: str  # "timing resnet18 at 1x3x224x224": for the line that says what a crash interrupted
    files_environ: dict = field(default_factory=dict)  # the files it reads and writes, chosen as it was submitted
    running: bool = False
    iterating: bool = False  # it has streamed samples or progress: it checks its cancel flag from now on
    cancel_sent_at: float | None = None
    enforced: bool = False  # a timer will kill it if it has not stopped within the grace of its cancel
    phase: str = ""  # what its process said it was doing last ("the build of tests.models:net")
    alive_at: float = 0.0  # monotonic time of its last event once running: its deadline counts from there
    passed: bool = False  # a pass of it has come back (a heartbeat, samples): PASS_DEADLINE_S from then on
    samples_phase: str = ""  # of its last samples ("warmup", "timed"): which pass a deadline interrupted
    overdue: bool = False  # past its deadline: its process is being killed

    def heard(self, message: Any) -> None:
        """What an event of this job says of it: any event is a sign of life (its deadline counts from there);
        Started: it runs; a PHASE: what its process does now; a heartbeat (ALIVE) or samples: a pass came back
        (and the phase of its latest sample); samples or progress: it iterates (it checks its cancel flag), but for a
        note (said before anything runs)."""
        self.alive_at = time.monotonic()
        if isinstance(message, Started):
            self.running = True
        elif isinstance(message, Progress) and message.what == PHASE:
            self.phase = str(message.data)
        elif isinstance(message, Progress) and message.what == ALIVE:
            self.passed = True
            if isinstance(message.data, tuple) and len(message.data) == 2 and message.data[1]:
                self.samples_phase = str(message.data[1])
        elif isinstance(message, Progress) and message.what == NOTE:
            pass
        elif isinstance(message, (Samples, Progress)):
            self.iterating = True
            if isinstance(message, Samples):
                self.passed = True
                self.samples_phase = message.phase or self.samples_phase


class _UiUnpickler(pickle.Unpickler):
    """Unpickles events, refusing any torch class: the UI process must never import torch, and a result that
    carries a torch object (a TorchVersion, a torch.Size) is a bug to see, not to paper over."""

    def find_class(self, module: str, name: str) -> Any:
        if module == "torch" or module.startswith("torch."):
            raise ProtocolError(f"a torch object ({module}.{name}) in an event: the UI process does not load torch")
        return super().find_class(module, name)


def grace_of(info: JobInfo) -> float:
    """How long a cancelled job may take to stop: CANCEL_GRACE_S once it iterates, BUILD_GRACE_S before."""
    return CANCEL_GRACE_S if info.iterating else BUILD_GRACE_S


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
    """<temp>/torchperf-tui-<uid>/measurement-{pid}.log, where {pid} becomes each measurement process's own pid,
    in a folder of this user's alone (on a shared box another user's folder of the same name must not decide
    where this one's log goes)."""
    uid = os.getuid() if hasattr(os, "getuid") else 0
    folder = os.path.join(tempfile.gettempdir(), f"torchperf-tui-{uid}")
    os.makedirs(folder, mode=0o700, exist_ok=True)
    info = os.lstat(folder)
    if not os.path.isdir(folder) or os.path.islink(folder) or (hasattr(os, "getuid") and info.st_uid != uid):
        folder = tempfile.mkdtemp(prefix="torchperf-tui-")
    return os.path.join(folder, "measurement-{pid}.log")


class MeasurementProcess:
    """One measurement process at a time; replaced when it dies or must be killed."""

    def __init__(self, on_event: Callable[[Any], None], on_notice: Callable[[str], None] | None = None,
                 log_path: str | None = None, output: str = "log", restart: bool = True,
                 cpus: frozenset[int] | set[int] | None = None, deadlines: Deadlines | None = None) -> None:
        """`log_path`: where each process's stdout and stderr go ({pid} is its pid; default_log_path());
        `output="stderr"`: its stdout (the model's prints) to this process's stderr instead (the CLI: a model's
        print() is the user's to see, never in the command's output), its stderr (a crash dump, a traceback)
        still to the log. `restart=False`: a process that dies or is killed is not replaced (the CLI runs one
        job and ends). `cpus`: the CPUs each process runs on, set by the process itself before it imports
        torch (whose default thread count follows them); None: where it is started. `deadlines`: how long a running
        job may stay silent (None: Deadlines.from_env(), read at start; a bad value there fails every job with
        its line)."""
        self.on_event = on_event
        self.cpus = frozenset(cpus) if cpus else None
        self.on_notice = on_notice or (lambda text: None)
        if output not in ("log", "stderr"):
            raise ValueError(f"output must be 'log' or 'stderr', not {output!r}")
        self.prints_to_stderr = output == "stderr"
        self.restart = restart
        self.log_template = log_path or default_log_path()
        self.log_path: str | None = None  # the log of the process now serving
        self.pid: int | None = None  # of the process now serving, once it said Ready
        self._ids = itertools.count(1)
        self._lock = threading.RLock()
        self._jobs: dict[int, JobInfo] = {}
        self._process: Any = None
        self._outbox: queue.Queue | None = None
        self._generation = 0
        self._stopping = False
        self._ready = False
        self.unavailable_reason: str | None = None
        self._supervisor: queue.Queue | None = None
        self.deadlines = deadlines
        self._watchdog = Watchdog(self._overdue, self._stop_overdue)

    # -- life cycle ------------------------------------------------------------------------------------
    def start(self) -> None:
        """Start a measurement process (a new interpreter running torchperf_tui.measure) and the threads that
        talk to it; jobs still waiting from a process that went are sent to this one."""
        if self.deadlines is None:
            try:
                self.deadlines = Deadlines.from_env()
            except TorchperfError as exc:  # every job fails with the line; nothing is started
                self.unavailable_reason = str(exc)
                return
        self._watchdog.start()
        with self._lock:
            self._generation += 1
            generation = self._generation
            process, conn, self.log_path = spawn(self.log_template, self.cpus, self.prints_to_stderr)
            self._process, self.pid, self._ready = process, None, False
            self._outbox = queue.Queue()
            threading.Thread(target=self._write, args=(generation, conn, self._outbox), name="measure-out",
                             daemon=True).start()
            threading.Thread(target=self._read, args=(generation, conn, process), name="measure-in",
                             daemon=True).start()
            dropped = [j for j in self._jobs.values() if j.cancel_sent_at is not None]
            for job in dropped:  # cancelled while they waited: not worth starting in the new process
                del self._jobs[job.job_id]
            for job in self._jobs.values():  # jobs that were waiting when the old process went
                job.running = job.iterating = False
                job.phase = ""
                self._outbox.put(StartJob(job.job_id, job.kind, job.params, job.files_environ))
        for job in dropped:
            self.on_event(JobFailed(job.job_id, "cancelled before it started", cancelled=True))

    def stop(self, grace_s: float = 1.5) -> None:
        """Ask the process to finish; kill it if it has not within `grace_s` (0: kill it now). Its log goes
        if it is empty."""
        with self._lock:
            self._stopping = True
            process, outbox, log = self._process, self._outbox, self.log_path
        self._watchdog.stop()
        if process is None:
            return
        if outbox is not None:
            outbox.put(Quit())
        try:
            if grace_s <= 0:
                raise TimeoutError
            process.wait(timeout=grace_s)
        except Exception:  # subprocess.TimeoutExpired: stuck in native code (or a user thread holding it)
            process.kill()
            try:
                process.wait(timeout=2)
            except Exception:
                pass  # it goes when the kernel lets it; the app does not wait for it
        remove_if_empty(log)

    # -- jobs --------------------------------------------------------------------------------------------
    def submit(self, kind: str, params: dict | None = None, what: str = "") -> int:
        """Start a job. The one rule of the machine: one measurement at a time. A job that measures (timing,
        A/B, kernels, throughput, profile, checks) cancels every other measuring job first (their owners get
        their cancelled answers), so two measurements never share the cores or the GPU."""
        measuring = measuring_kinds()
        if kind in measuring:
            for other in self.pending(measuring):
                self.cancel(other.job_id)
        job_id = next(self._ids)
        with self._lock:
            unavailable = self._outbox is None
            if not unavailable:
                info = JobInfo(job_id, kind, dict(params or {}), what or kind, files_environ())
                self._jobs[job_id] = info
                self._outbox.put(StartJob(job_id, kind, info.params, info.files_environ))
                # A job cancelled without enforcing (its result merely dropped) now holds this one up: it
                # gets the same grace as any other, then it is killed, so a stuck one cannot wedge the queue.
                for other in list(self._jobs.values()):
                    if other.cancel_sent_at is not None and not other.enforced:
                        self._enforce_later(other)
        if unavailable:  # no process serves (it could not start): say so at once, never leave a job waiting
            self.on_event(JobFailed(job_id, self.unavailable_reason or "the measurement process is not running"))
        return job_id

    def cancel(self, job_id: int, grace_s: float | None = None, enforce: bool = True) -> None:
        """Stop a job at its next iteration. With `enforce`, a job still running `grace_s` (default: its grace,
        see `grace_of`) after the cancel is stopped by killing the process; without, its result is merely dropped, unless
        another job is submitted behind it (then it is enforced all the same: see submit)."""
        with self._lock:
            info = self._jobs.get(job_id)
            if info is None or self._outbox is None:
                return
            if info.cancel_sent_at is None:
                self._outbox.put(CancelJob(job_id))
                info.cancel_sent_at = time.monotonic()
            if enforce and not info.enforced:
                self._enforce_later(info, grace_s)

    def _enforce_later(self, info: JobInfo, grace_s: float | None = None) -> None:
        """Kill `info`'s process if the job is still running `grace_s` after its cancel (under the lock)."""
        info.enforced = True
        grace_s = grace_of(info) if grace_s is None else grace_s
        left = max(0.0, info.cancel_sent_at + grace_s - time.monotonic())
        timer = threading.Timer(left, self._enforce_cancel, args=(info.job_id, self._generation, grace_s))
        timer.daemon = True
        timer.start()

    def pending(self, kinds: frozenset[str] | set[str] | None = None) -> list[JobInfo]:
        with self._lock:
            return [j for j in self._jobs.values() if kinds is None or j.kind in kinds]

    def _enforce_cancel(self, job_id: int, generation: int, grace_s: float) -> None:
        with self._lock:
            info = self._jobs.get(job_id)
            if info is None or generation != self._generation or not info.running:
                return  # it stopped in time (or never started, or the process was replaced meanwhile)
            process = self._process
        self._replace(process, f"the measurement process did not stop {info.what} within {grace_s:g} s of the "
                               "cancel (stuck in native code?): killed it", job_id)

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
        try:
            self._read_until_closed(generation, conn, process)
        finally:
            conn.close()

    def _read_until_closed(self, generation: int, conn: Any, process: Any) -> None:
        while True:
            try:
                message = unpack(_UiUnpickler(io.BytesIO(conn.recv_bytes())).load())
            except (EOFError, OSError):
                break
            except Exception as exc:  # a message that does not unpickle here: a bug, said in one line
                # Jobs run one at a time and their last message is their result: it is the running job's.
                self._fail_running(f"the measurement process sent what this process cannot read: "
                                   f"{type(exc).__name__}: {exc}", generation)
                continue
            with self._lock:
                if generation != self._generation:
                    return
                info = self._jobs.get(getattr(message, "job_id", None))
                if isinstance(message, Ready):
                    self.pid, self._ready = message.pid, True
                elif isinstance(message, (JobDone, JobFailed)):
                    self._jobs.pop(message.job_id, None)
                elif info is not None:
                    passed = info.passed
                    info.heard(message)
                    if isinstance(message, Started) or info.passed != passed:
                        # its deadline starts, or shortens to the pass deadline: the watchdog may be asleep for the
                        # build's (a pass that never returned was stopped after 120 s, not its 4)
                        self._watchdog.wake()
                if isinstance(message, Progress) and message.what in (PHASE, ALIVE):
                    continue  # for the line that says what a death or a deadline interrupted; no one else's business
            self.on_event(message)
        try:
            process.wait(timeout=5)
        except Exception:
            pass
        with self._lock:
            if generation != self._generation or self._stopping:
                return
        self._replace(process, None, None)

    def _overdue(self, now: float) -> tuple[tuple[JobInfo, float, Any] | None, float | None]:
        """For the watchdog: (the first running job past its deadline, the seconds it was allowed, its process) and
        marked overdue, or None and the seconds until the next deadline (None: no job runs)."""
        with self._lock:
            late, wait = first_overdue([j for j in self._jobs.values() if j.running and not j.overdue],
                                       self.deadlines, now)
            if late is None:
                return None, wait
            late[0].overdue = True
            return (*late, self._process), None

    def _stop_overdue(self, late: tuple[JobInfo, float, Any]) -> None:
        info, allowed, process = late
        self._replace(process, overdue_line(info.what, info.phase, info.passed, info.samples_phase, allowed), info.job_id)

    def _on_supervisor(self, fn: Callable[[], None]) -> None:
        """Run `fn` on one long-lived thread and wait for it. A restart must not start the process from the
        reader or a timer thread: the measurement process asks to be killed when the thread that started it
        ends (PR_SET_PDEATHSIG is per thread), and those threads end right after."""
        with self._lock:
            if self._supervisor is None:
                self._supervisor = queue.Queue()
                threading.Thread(target=self._supervise, args=(self._supervisor,), name="measure-supervisor",
                                 daemon=True).start()
            tasks = self._supervisor
        done: queue.Queue = queue.Queue()
        tasks.put((fn, done))
        error = done.get()
        if error is not None:
            raise error

    @staticmethod
    def _supervise(tasks: queue.Queue) -> None:
        while True:
            fn, done = tasks.get()
            try:
                fn()
            except Exception as exc:  # handed back to the caller
                done.put(exc)
            else:
                done.put(None)

    def _fail_running(self, reason: str, generation: int) -> None:
        with self._lock:
            if generation != self._generation:
                return
            running = [self._jobs.pop(j.job_id) for j in list(self._jobs.values()) if j.running]
        for job in running:
            self.on_event(JobFailed(job.job_id, reason, internal=True))  # a bug of ours

    def _replace(self, process: Any, reason: str | None, job_id: int | None) -> None:
        """The process died (reason None: say how) or must go (kill it): fail the job it was running, start a
        fresh process for the queued ones, and say what happened. A process that died before it was ready
        (torch failed to import) is not restarted: that would only fail again. The lock guards only the
        state: killing, waiting and starting happen outside it, so the UI thread never waits on them."""
        with self._lock:
            if process is not self._process or self._stopping:
                return
            running = [j for j in self._jobs.values() if j.running]
            if job_id is not None and not any(j.job_id == job_id for j in running):
                return  # it finished meanwhile: nothing to kill for, and the process goes on serving
            self._generation += 1  # the old process's threads stop acting on what they read
            outbox, self._outbox, self._process = self._outbox, None, None
            was_ready = self._ready
            log = self.log_path
        if outbox is not None:
            outbox.put(Quit())  # ends the old writer thread
        if process.poll() is None:
            process.kill()
        try:
            process.wait(timeout=10)
        except Exception:  # subprocess.TimeoutExpired: stuck in the driver; it goes when it can
            pass
        remove_if_empty(log)
        kept_log = f" (its log: {log})" if log and os.path.exists(log) else ""
        if reason is None:
            during = ""
            if running:
                job = running[0]
                during = f" while {job.what}" + (f" (during {job.phase})" if job.phase else "")
            reason = f"the measurement process {describe_exit(process.returncode)}{during}"
        with self._lock:
            failed = [self._jobs.pop(j.job_id) for j in running if j.job_id in self._jobs]
            if not was_ready or not self.restart:
                if not was_ready:
                    reason += f" before it was ready: measurements are not available{kept_log}"
                else:
                    reason += kept_log
                self.unavailable_reason = reason
                failed += list(self._jobs.values())
                self._jobs.clear()
        if was_ready and self.restart:
            reason += f"{kept_log}; started a new one"
            try:
                self._on_supervisor(self.start)
            except OSError as exc:
                self.unavailable_reason = f"the measurement process could not be started again: {exc}"
                reason = self.unavailable_reason
                with self._lock:
                    failed += list(self._jobs.values())
                    self._jobs.clear()
        for job in failed:
            self.on_event(JobFailed(job.job_id, reason))
        self.on_notice(reason)
