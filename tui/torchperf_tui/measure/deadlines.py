"""How long a job may go without a sign of life before the client stops its measurement process (a model that
blocks for ever in its build or in a pass would otherwise hold the command, or the app's pane, until Ctrl-C).

A deadline is on silence, not on the whole job: every event of a running job (its phase, a heartbeat from its
passes, its samples, its progress) starts the wait again, so a long run that keeps making progress (a sweep, a
search with no time budget, thousands of iterations) is never cut, and one that stops is stopped within the wait.
Until its first pass has come back a job gets BUILD_DEADLINE_S: the import of the model's module, its build (with
torch.compile's compilation) or its analysis, and the first pass, where cuDNN picks its algorithms and lazy modules
initialise. Once a pass has come back, PASS_DEADLINE_S: the longest one pass (or one step of the search, one block) may take. Both generous, both
set by an environment variable (a model that really builds for longer; tests, which wait seconds).
No torch here.
"""

from __future__ import annotations

import math
import os
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping

from torchperf_tui.core.errors import TorchperfError

BUILD_DEADLINE_S = 600.0
PASS_DEADLINE_S = 300.0
BUILD_ENV = "TORCHPERF_BUILD_DEADLINE"
PASS_ENV = "TORCHPERF_PASS_DEADLINE"


@dataclass(frozen=True)
class Deadlines:
    """Seconds of silence allowed before the first pass has come back (`build_s`) and after (`pass_s`)."""

    build_s: float = BUILD_DEADLINE_S
    pass_s: float = PASS_DEADLINE_S

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> "Deadlines":
        """The defaults, or the seconds BUILD_ENV and PASS_ENV give; a value that is not a number of seconds > 0 is
        one line (TorchperfError)."""
        environ = os.environ if environ is None else environ
        return cls(build_s=_seconds(environ, BUILD_ENV, BUILD_DEADLINE_S),
                   pass_s=_seconds(environ, PASS_ENV, PASS_DEADLINE_S))


def _seconds(environ: Mapping[str, str], name: str, default: float) -> float:
    text = environ.get(name, "").strip()
    if not text:
        return default
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise TorchperfError(f"{name}={text!r}: give a number of seconds > 0 (the default is {default:g})")
    return value


def first_overdue(running: Iterable[Any], deadlines: Deadlines, now: float) -> tuple[tuple[Any, float] | None,
                                                                                    float | None]:
    """((the first of the `running` jobs past its deadline at `now`, the seconds it was allowed), None), or (None,
    the seconds until the next deadline; None where no job runs). A job (the client's JobInfo) has `alive_at`,
    the monotonic time of its last event, and `passed`."""
    wait = None
    for job in running:
        allowed = deadlines.pass_s if job.passed else deadlines.build_s
        left = job.alive_at + allowed - now
        if left <= 0:
            return (job, allowed), None
        wait = left if wait is None else min(wait, left)
    return None, wait


class Watchdog:
    """A thread that sleeps until the next deadline (or until woken: a job started) and hands each job past it to
    `expire`. `scan(now)` is the client's: (a job past its deadline, or None; the seconds until the next one, or
    None while no job runs). Asleep while no job runs; started once, stopped with its client."""

    def __init__(self, scan: Callable[[float], tuple[Any, float | None]], expire: Callable[[Any], None]) -> None:
        self.scan, self.expire = scan, expire
        self._wake = threading.Event()
        self._stopped = False
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="measure-deadlines", daemon=True)
            self._thread.start()

    def wake(self) -> None:
        self._wake.set()

    def stop(self) -> None:
        self._stopped = True
        self._wake.set()

    def _run(self) -> None:
        while True:
            self._wake.clear()  # before the scan: a wake during it makes the wait below return at once
            if self._stopped:
                return
            late, wait = self.scan(time.monotonic())
            if late is None:
                self._wake.wait(wait)
            else:
                self.expire(late)


def stage(phase: str, passed: bool, samples_phase: str) -> str:
    """What a job was doing when it fell silent, from the last phase its process announced ("the build of M", "a
    pass of M"), whether a pass had come back, and the phase of its latest sample ("first", "warmup", "timed"): 'its
    build', 'its first pass', 'a warm-up pass (or the first timed one)', 'a timed pass'. (The pass that follows
    the last warm-up sample is the warm-up's next or the first timed one: the timed loop does not say which.)"""
    for start, said in (("the import of ", "the import of its module"), ("the analysis of ", "its analysis"),
                        ("the build of ", "its build")):
        if phase.startswith(start):
            return said
    if not passed:
        return "its first pass" if phase else "its work"
    if samples_phase in ("first", "warmup"):
        return "a warm-up pass (or the first timed one)"
    if samples_phase == "timed":
        return "a timed pass"
    return "a pass"


def overdue_line(what: str, phase: str, passed: bool, samples_phase: str, waited_s: float) -> str:
    """The one line for a job stopped by its deadline: 'timing m:f: the model did not finish its build within 600 s;
    stopped its measurement process (TORCHPERF_BUILD_DEADLINE=SECONDS waits longer)'."""
    name = PASS_ENV if passed else BUILD_ENV
    subject = "the model" if phase else "the job"
    return (f"{what}: {subject} did not finish {stage(phase, passed, samples_phase)} within {waited_s:g} s; stopped "
            f"its measurement process ({name}=SECONDS waits longer)")
