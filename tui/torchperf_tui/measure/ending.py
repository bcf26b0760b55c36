"""How a CLI command ends on SIGTERM or SIGHUP: through its clean-up (a measurement process stopped, its empty log
removed), not where it stands. Apart from the job client (cli_jobs.py) so that a command refused before any job is
sent loads neither."""

from __future__ import annotations

import contextlib
import signal
from typing import Any, Iterator


class Terminated(BaseException):
    """SIGTERM or SIGHUP reached the command: not an Exception, so nothing on the way catches it as an error."""

    def __init__(self, signum: int) -> None:
        self.signum = int(signum)
        super().__init__(signal.Signals(self.signum).name)


ENDING_SIGNALS = (signal.SIGTERM, signal.SIGHUP)


@contextlib.contextmanager
def ending_on_signals() -> Iterator[None]:
    """Within it, SIGTERM or SIGHUP (a `kill`, a closed terminal) raise Terminated in the main thread, so the
    command ends through its `finally`s (a measurement process stopped, its empty log removed) instead of dying
    where it stands; the second such signal gets the default (the process ends at once). Python's default for
    both is to die with nothing cleaned up."""
    def raise_terminated(signum: int, frame: Any) -> None:
        for sig in ENDING_SIGNALS:
            signal.signal(sig, signal.SIG_DFL)
        raise Terminated(signum)

    previous = {}
    try:
        for sig in ENDING_SIGNALS:
            previous[sig] = signal.signal(sig, raise_terminated)
    except ValueError:  # not the main thread (a test calling main from a thread): Python's defaults stay
        pass
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
