"""The messages between the app's UI process and its measurement process, carried over a pipe.

Requests go to the measurement process (start a job, cancel it, quit); events come back (ready, progress,
batched samples, a result, an error). Each message travels as `(PROTOCOL_VERSION, message)`: a process
that receives another version refuses it rather than misread it. Everything here is plain data: results
are the engine's own dataclasses, whose modules load without torch (engine/hardware/lazy_torch.py).

Job kinds are the names in measure/jobs.py's table, whose runners (measure/runners.py) document the params each takes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

PROTOCOL_VERSION = 6  # bumped whenever a message changes its fields, or a job kind its name or params

# Progress(what=PHASE) says which part of a job's user code runs now ("the import of M", "the build of M", "a
# pass of M"): sent before that code runs, so a process that dies in it (os._exit, a segfault) is reported with it.
# The client keeps it for that line and does not pass it on.
PHASE = "phase"
# Progress(what=ALIVE, data=(passes come back so far, the phase of its latest sample or "")): the job's passes go on, sent from its cancel checks (between
# passes) at most every ALIVE_EVERY_S, and once as its first pass comes back. The client takes it as a sign of life
# for the job's deadline (measure/deadlines.py) and does not pass it on.
ALIVE = "alive"
ALIVE_EVERY_S = 2.0
# Progress(what=NOTE, data=one line): something the job says beside its result (a flag without effect on this
# device, the dtype there, an input shape assumed), sent to every front end: the CLI prints it on stderr, the app
# leaves it out (app/session.py). Not a sign that the job iterates (the client's cancel grace, measure/client.py).
NOTE = "note"


class ProtocolError(Exception):
    """A message of another protocol version, or not a message at all."""


# -- requests: UI -> measurement process ---------------------------------------------------------------

@dataclass(frozen=True)
class StartJob:
    """Run job `kind` with `params`; its events carry `job_id`."""

    job_id: int
    kind: str
    params: dict[str, Any] = field(default_factory=dict)
    # The sender's variables that choose the files the job reads and writes (core/kept_files.py's FILE_ENVS), as
    # they were when it sent the job: the job runs under them, not under those the process was started with.
    files_environ: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class CancelJob:
    """Stop job `job_id` at its next iteration (a queued one never starts)."""

    job_id: int


@dataclass(frozen=True)
class Quit:
    """Finish: the process exits once the job in flight has stopped."""


# -- events: measurement process -> UI ------------------------------------------------------------------

@dataclass(frozen=True)
class Ready:
    """The process has imported torch and the engine and takes jobs."""

    pid: int


@dataclass(frozen=True)
class Started:
    """Job `job_id` left the queue and runs now."""

    job_id: int


@dataclass(frozen=True)
class Progress:
    """A step of a job: `what` names it ("batch_try", "block", "iteration"), `data` is the engine's value."""

    job_id: int
    what: str
    data: Any


@dataclass(frozen=True)
class Samples:
    """Timing samples of one phase ("first", "warmup", "timed"), batched: raw milliseconds, no statistics
    (the UI computes them). `first_seen` flags the timed samples whose input shape was new; `memory` is
    (time, allocated, reserved) points read between iterations, of kind `memory_kind`."""

    job_id: int
    phase: str
    index: int
    total: int
    samples_ms: tuple[float, ...]
    first_seen: tuple[bool, ...] = ()
    memory: tuple[tuple[float, int, int], ...] = ()
    memory_kind: str = ""


@dataclass(frozen=True)
class JobDone:
    """Job `job_id` finished: `result` is the engine's result; `extra` what the UI needs beside it (the
    environment fingerprint for history records)."""

    job_id: int
    result: Any
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class JobFailed:
    """Job `job_id` failed; `error` is one line for a person. `cancelled`: it was cancelled before it began
    (a queued job replaced by a newer request), which is not a failure to report. `internal`: the error is
    not one of the engine's one-line refusals (a bug here, not bad input): the CLI exits 1 for it, not 2.
    `refusal` and `remedies`: a refusal that says what to change (engine.errors.Remedy) in parts, for a front end
    that names its settings otherwise than the CLI, whose words `error` holds (wording/refusals.py)."""

    job_id: int
    error: str
    cancelled: bool = False
    internal: bool = False
    refusal: str = ""
    remedies: tuple = ()


def pack(message: Any) -> tuple[int, Any]:
    return (PROTOCOL_VERSION, message)


def unpack(envelope: Any) -> Any:
    """The message inside an envelope; ProtocolError for another version or a malformed envelope."""
    if not (isinstance(envelope, tuple) and len(envelope) == 2 and isinstance(envelope[0], int)):
        raise ProtocolError(f"not a protocol message: {type(envelope).__name__}")
    version, message = envelope
    if version != PROTOCOL_VERSION:
        raise ProtocolError(f"protocol version {version}, expected {PROTOCOL_VERSION}")
    return message
