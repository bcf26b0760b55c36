"""The measurement process's main loop: it imports torch, holds the model, and runs one job at a time.

Started as a new interpreter (`python -m torchperf_tui.measure`, never forked: CUDA is initialised only
here) by measure/client.py, with one end of a socket pair. For the app its stdout and stderr go to a log file
named after this process (its stdin is /dev/null), so nothing a model prints or reads can touch the app's
terminal; for the CLI its stdout goes to the CLI's stderr, so a model's print() never mixes with the command's
output, and its stderr (a crash dump, a traceback) to the log. A reader thread takes requests off the pipe: a new job joins the
queue, a cancel sets that job's flag (checked by the engine between iterations), a quit or a closed pipe
ends the process. Jobs run on the main thread, one after another: while one measures, this process does
nothing else (samples leave in batches, twice a second, between iterations: measure/runners.py's SampleStream).
"""

from __future__ import annotations

import contextlib
import os
import queue
import signal
import sys
import threading
import time
from typing import Any

from torchperf_tui.core.parent_death import signal_on_parent_death
from torchperf_tui.engine.hardware.torch_notices import quiet_torch_notices
from torchperf_tui.measure.protocol import (ALIVE, ALIVE_EVERY_S, PHASE, CancelJob, JobDone, JobFailed, Quit, Ready,
                                           StartJob, Started, pack, unpack)
from torchperf_tui.core.errors import TorchperfError, first_line, user_message
from torchperf_tui.core.kept_files import FILE_ENVS, files_environ
from torchperf_tui.engine.measurements.flags import TorchState, guarded_job, import_changes, pristine_state
from torchperf_tui.engine.workloads.factories import is_custom, load_factory
from torchperf_tui.measure.jobs import runner_of
from torchperf_tui.measure.runners import JobContext


PRINTS_TO_STDERR = "prints-to-stderr"  # the argument that sends stdout (the model's prints) to the stderr given
# Kineto (torch's profiler) writes its stages to stderr at every profile ("USDT: profiler_start", and on a box
# without a GPU an "ERROR: gpuGetDeviceCount failed"): that left every `profile`'s log behind, holding only that.
# Above its highest level (STAGE 4, USDT 5) it says nothing; a user's own setting is kept.
KINETO_QUIET = "6"

_own_log: list[str] = []  # this process's log, once opened: removed when it ends with the log empty


def log_file(template: str, pid: int) -> str:
    """The log's path: `template` with {pid} replaced by the measurement process's pid (the client computes
    the same from the pid it started)."""
    return template.replace("{pid}", str(pid))


def remove_if_empty(path: str | None) -> None:
    """An ended process's log that holds nothing is not worth leaving in the temp folder (the process removes its
    own as it ends, the client as it stops it or finds it dead: whichever comes first)."""
    if not path:
        return
    try:
        if os.path.isfile(path) and not os.path.islink(path) and os.path.getsize(path) == 0:
            os.unlink(path)
    except OSError:
        pass


def leave(code: int = 0) -> None:
    """End this process at once (no Python clean-up: a model's threads must not hold it), its log removed if empty."""
    for path in _own_log:
        remove_if_empty(path)
    os._exit(code)


def _end_on_sigterm(signum: int, frame: Any) -> None:
    """SIGTERM (a `kill`, or the kernel's word that the app died: see _die_with_parent): the empty log goes, then
    the process ends by the signal, as the default would have."""
    for path in _own_log:
        remove_if_empty(path)
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)


def _detach_from_terminal(log_path: str | None, prints_to_stderr: bool = False) -> None:
    """stdin from /dev/null, stderr (the file descriptor: native libraries and faulthandler write there too) to
    the log, and stdout too, or (`prints_to_stderr`, the CLI) to the stderr this process was given: the model's
    prints are the user's to see, a crash dump or a traceback is the log's; SIGINT and SIGHUP ignored (Ctrl-C and
    a closed terminal reach the app's whole process group: the app decides, and cancels the job or stops this
    process); SIGTERM ends it with its empty log removed; so does the app's death (see _die_with_parent)."""
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    # Emptied as it is opened: a log of this pid can only be an older process's (a pid comes round again), kept for
    # its crash, and must not be named as this one's with the older one's words in it.
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND | getattr(os, "O_NOFOLLOW", 0)
    path = log_file(log_path, os.getpid()) if log_path else None
    try:
        out = os.open(path or os.devnull, flags, 0o600)
    except OSError:  # no log rather than no measurements
        out, path = os.open(os.devnull, os.O_WRONLY), None
    if path:
        _own_log.append(path)
    os.dup2(2 if prints_to_stderr else out, 1)
    os.dup2(out, 2)
    os.close(out)
    sys.stdout = open(1, "w", buffering=1, closefd=False)
    sys.stderr = open(2, "w", buffering=1, closefd=False)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, _end_on_sigterm)
    _die_with_parent()


CPUS_ENV = "TORCHPERF_CPUS"  # "0,1,2": the CPUs the measurement process runs on, set before torch is imported


def apply_cpu_set(environ: dict | None = None, set_affinity: Any = None) -> frozenset[int] | None:
    """Put this process on the CPUs `environ[CPUS_ENV]` names (the app's plan on a box with cores to spare),
    before torch is imported: torch sizes its intra-op pool (the process's default thread count) from the mask
    it finds then. The variable is taken out, so what the model starts does not inherit it. None: no set (or
    none that could be applied), the process runs where it was started."""
    environ = os.environ if environ is None else environ
    text = environ.pop(CPUS_ENV, None)
    if not text:
        return None
    try:
        cpus = frozenset(int(cpu) for cpu in text.split(",") if cpu.strip())
    except ValueError:
        return None
    if not cpus:
        return None
    try:
        (set_affinity or os.sched_setaffinity)(0, cpus)
    except (AttributeError, OSError):  # no affinity on this platform, or CPUs gone: run where it was started
        return None
    return cpus


def _die_with_parent() -> None:
    """Linux: SIGTERM this process when the app's process ends, even by SIGKILL (no orphans holding a GPU), so that
    it removes its empty log as it goes (_end_on_sigterm). The handler runs on the main thread, which a model's
    native call may hold: the requests thread sees the app's end of the socket close at the same moment and ends
    the process from there (JobServer.read_requests)."""
    signal_on_parent_death(signal.SIGTERM)


class JobServer:
    """The measurement process's side of the pipe: reads requests on a thread of its own, runs one job at a
    time on the main thread (`serve`), and sends back its events."""

    def __init__(self, conn: Any) -> None:
        self.conn = conn
        self.send_lock = threading.Lock()
        self.jobs: queue.Queue = queue.Queue()
        self.contexts: dict[int, Any] = {}  # job id -> JobContext, from queued until finished
        self.cancelled_early: set[int] = set()
        self.lock = threading.Lock()

    def send(self, message: Any) -> None:
        with self.send_lock:
            try:
                self.conn.send(pack(message))
            except (OSError, EOFError, BrokenPipeError):
                leave(0)  # the app is gone: nothing to measure for

    def read_requests(self) -> None:
        while True:
            try:
                message = unpack(self.conn.recv())
            except (EOFError, OSError):
                leave(0)  # the app is gone (its end of the socket closed as it died, even by SIGKILL)
            except Exception:  # a request that does not unpickle here: skipped, the reader goes on
                import traceback

                traceback.print_exc()  # to the log file
                continue
            if isinstance(message, StartJob):
                self.jobs.put(message)
            elif isinstance(message, CancelJob):
                with self.lock:
                    ctx = self.contexts.get(message.job_id)
                    if ctx is None:
                        self.cancelled_early.add(message.job_id)
                    else:
                        ctx.cancel_event.set()
            elif isinstance(message, Quit):
                with self.lock:
                    for ctx in self.contexts.values():
                        ctx.cancel_event.set()
                while True:  # queued jobs are dropped: the app is leaving
                    try:
                        self.jobs.get_nowait()
                    except queue.Empty:
                        break
                self.jobs.put(None)
                return

    def serve(self) -> None:
        while True:
            job = self.jobs.get()
            if job is None:
                return
            ctx = JobContext(job.job_id, self.send)
            with self.lock:
                if job.job_id in self.cancelled_early:
                    self.cancelled_early.discard(job.job_id)
                    ctx.cancel_event.set()
                self.contexts[job.job_id] = ctx
            try:
                if ctx.cancelled():
                    self.send(JobFailed(job.job_id, "cancelled before it started", cancelled=True))
                    continue
                runner = runner_of(job.kind)
                if runner is None:
                    self.send(JobFailed(job.job_id, f"unknown job kind {job.kind!r}", internal=True))
                    continue
                self.send(Started(job.job_id))
                def call(job=job, ctx=ctx, runner=runner) -> tuple[Any, dict]:
                    notes = track_phases(job, ctx)  # the model's import runs here, under the guard
                    return with_notes(*runner(job.params, ctx), notes)

                try:
                    # From the process's pristine torch state, put back after: no model's settings leak on.
                    with files_chosen(job.files_environ):
                        result, extra = guarded_job(call)
                except BaseException as exc:  # the model's or ours: one line either way, the process stays
                    if os.environ.get("TORCHPERF_DEBUG"):
                        import traceback

                        traceback.print_exc()  # to the log file
                    if isinstance(exc, (Exception, SystemExit)):
                        remedies = getattr(exc, "remedies", ()) if isinstance(exc, TorchperfError) else ()
                        self.send(JobFailed(job.job_id, user_message(exc), internal=not isinstance(exc, TorchperfError),
                                            refusal=first_line(exc.refusal) if remedies else "", remedies=remedies))
                    else:  # KeyboardInterrupt and the like: raised by the model's code (SIGINT is ignored here)
                        said = str(exc).strip().splitlines()
                        self.send(JobFailed(job.job_id, f"the model's code raised {type(exc).__name__}"
                                                        + (f": {said[0]}" if said else "")))
                else:
                    try:
                        self.send(JobDone(job.job_id, result, extra))
                    except Exception as exc:  # a result that does not pickle: the job fails, the process stays
                        self.send(JobFailed(job.job_id, f"its result could not be sent from the measurement "
                                                        f"process: {type(exc).__name__}: {exc}", internal=True))
            finally:
                with self.lock:
                    self.contexts.pop(job.job_id, None)


@contextlib.contextmanager
def files_chosen(environ: dict[str, str]):
    """The job's files as its sender chose them (core/kept_files.py's FILE_ENVS set or unset as `environ` says),
    then this process's own again."""
    own = files_environ()
    _set_files(environ)
    try:
        yield
    finally:
        _set_files(own)


def _set_files(environ: dict[str, str]) -> None:
    """FILE_ENVS as `environ` has them; those it lacks unset."""
    for name in FILE_ENVS:
        if name in environ:
            os.environ[name] = environ[name]
        else:
            os.environ.pop(name, None)


def named_model(params: dict) -> str | None:
    """The model a job's params name (its own, or a config's, a base's or a run's), if any."""
    if isinstance(params.get("model"), str):
        return params["model"]
    for key in ("cfg", "base", "result"):
        model = getattr(params.get(key), "model", None)
        if isinstance(model, str):
            return model
    return None


def with_notes(result: Any, extra: dict, notes: list[str]) -> tuple[Any, dict]:
    """(result, extra) with `notes` about torch's state first in the result's `state_notes` when it has that
    field, else in `extra["state_notes"]` (as flags.guarded_job says its own)."""
    if not notes:
        return result, extra
    if hasattr(result, "state_notes"):
        result.state_notes = [*notes, *(result.state_notes or [])]
        return result, extra
    return result, {**extra, "state_notes": [*notes, *extra.get("state_notes", [])]}


def track_phases(job: StartJob, ctx: Any) -> list[str]:
    """Say which part of the model's code runs, before it runs: the import of its module (done here, as the
    engine would first thing: a module that fails to import is the same one-line error), its build, and its
    passes (from the job's first check of its cancel flag: the engine's loops check it before each pass, after
    the build). A process that dies in there (os._exit, a segfault) is then reported with that phase. Returns
    what the import changed of torch's state, in words (put back: the job runs from the process's own)."""
    model = named_model(job.params)
    if model is None:
        return []
    notes: list[str] = []
    if is_custom(model):
        module = model.split(':')[0].strip()
        ctx.progress(PHASE, f"the import of {module}")
        before = TorchState.current()
        load_factory(model)  # imported once: the engine's own call finds it in sys.modules
        notes = import_changes(module, before)
    ctx.progress(PHASE, f"the analysis of {model}" if job.kind == "analyse" else f"the build of {model}")
    checked = ctx.cancel_event.is_set
    checks = 0
    said_at, said_phase = 0.0, ""

    def cancelled() -> bool:
        # Called between passes: the first call says the passes begin, the next ones that they go on (a sign of
        # life for the client's deadline: measure/deadlines.py), at most every ALIVE_EVERY_S, and as the timed
        # loop's phase changes (so a deadline can say whether the warm-up or the timed passes were running).
        nonlocal checks, said_at, said_phase
        checks += 1
        phase = getattr(ctx, "last_phase", "")
        if checks == 1:
            ctx.progress(PHASE, f"a pass of {model}")
        elif checks == 2 or phase != said_phase or time.monotonic() - said_at >= ALIVE_EVERY_S:
            said_at, said_phase = time.monotonic(), phase
            ctx.progress(ALIVE, (checks - 1, phase))
        return checked()

    ctx.cancelled = cancelled
    return notes


def serve_fd(fd: int, log_path: str | None = None, prints: str | None = None) -> None:
    """The process entry point: `fd` is this end of the socket pair the app made."""
    from multiprocessing.connection import Connection

    serve(Connection(fd), log_path, prints_to_stderr=prints == PRINTS_TO_STDERR)


def serve(conn: Any, log_path: str | None = None, prints_to_stderr: bool = False) -> None:
    _detach_from_terminal(log_path, prints_to_stderr)
    apply_cpu_set()  # before torch is imported: its default thread count follows the mask
    os.environ.setdefault("KINETO_LOG_LEVEL", KINETO_QUIET)  # read when torch loads its profiler
    quiet_torch_notices()  # torchao's import (transformers makes it where installed) logs notices for torch's developers
    import faulthandler

    faulthandler.enable()  # a segfault in an extension leaves its Python stack in the log
    import torch  # noqa: F401 - the seconds this takes are spent here, once, before the first job

    import torchperf_tui.engine.measurements.timing  # noqa: F401
    pristine_state()  # torch's pristine state, before any job imports a model's module

    server = JobServer(conn)
    threading.Thread(target=server.read_requests, name="requests", daemon=True).start()
    server.send(Ready(os.getpid()))
    server.serve()
    leave(0)
