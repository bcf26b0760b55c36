"""SIGTERM and SIGHUP end the app the way `q` does, so the terminal is given back as it was found.

Python's default for both is to die at once, which leaves the terminal in the alternate screen with mouse
reporting on (an SSH connection that drops, or a terminal window closed, sends SIGHUP). Here the first signal
asks the app to exit through its event loop (the driver then leaves application mode); if the app has not
finished within FORCE_AFTER_S, the terminal's modes are reset by hand and the process ends. The exit code is
128 + the signal's number, as a shell reports a process killed by it.

The handlers are Python's own (`signal.signal`), not the event loop's (`loop.add_signal_handler`): the loop's
run only when the loop comes back to its selector, so a loop that never does (a message handler spinning, a
worker holding it) ignored every signal and kept running after its terminal had closed. Python runs these
between two bytecodes whatever the loop is doing; the deadline is kept by a thread of its own, armed by the
first signal, so it holds even when the main thread never gets back to Python.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import threading
from typing import TYPE_CHECKING, Callable

if TYPE_CHECKING:
    from textual.app import App

EXIT_SIGNALS = (signal.SIGTERM, signal.SIGHUP)
FORCE_AFTER_S = 3.0
# What Textual's Linux driver writes when it leaves application mode: mouse reporting, bracketed paste and
# focus events off, the cursor shown, the alternate screen left.
TERMINAL_RESET = ("\x1b[?1000l\x1b[?1003l\x1b[?1015l\x1b[?1006l\x1b[?2004l\x1b[?1004l\x1b[<u"
                  "\x1b[?1049l\x1b[?25h")


def exit_on_signals(app: "App") -> Callable[[], None]:
    """Install the handlers (call from the app's `on_load`, in the main thread, its loop running). Returns what
    puts the previous handlers back, to call when the app has ended."""
    if threading.current_thread() is not threading.main_thread():  # signal.signal works only there
        return lambda: None
    loop = asyncio.get_running_loop()
    deadline = _Deadline(app)
    previous = {}
    for sig in EXIT_SIGNALS:
        try:
            previous[sig] = signal.signal(sig, lambda signum, frame: _exit_on(app, loop, deadline, signum))
        except (OSError, ValueError):  # not POSIX
            break
    deadline.start()

    def restore() -> None:
        deadline.retire()
        if threading.current_thread() is threading.main_thread():
            for sig, handler in previous.items():
                signal.signal(sig, handler)

    return restore


class _Deadline(threading.Thread):
    """Waits for the first signal, then gives the app FORCE_AFTER_S to finish before ending the process."""

    def __init__(self, app: "App") -> None:
        super().__init__(name="torchperf-signal-deadline", daemon=True)
        self.app = app
        self.code: int | None = None
        self._armed = threading.Event()
        self._retired = False

    def arm(self, code: int) -> None:
        self.code = code
        self._armed.set()  # only this thread waits on it: safe from a signal handler

    def retire(self) -> None:
        """The app has ended: a deadline already armed still holds (the process must end), else none is kept."""
        if self.code is None:
            self._retired = True
            self._armed.set()

    def run(self) -> None:
        self._armed.wait()
        if self._retired:
            return
        threading.Event().wait(FORCE_AFTER_S)
        _force_exit(self.app, self.code or 1)


def _exit_on(app: "App", loop: asyncio.AbstractEventLoop, deadline: _Deadline, signum: int) -> None:
    code = 128 + int(signum)
    if deadline.code is not None:  # a second signal: do not wait any longer
        _force_exit(app, code)
    deadline.arm(code)
    try:
        loop.call_soon_threadsafe(_exit_app, app, code)  # what asyncio's own signal handling does
    except RuntimeError:  # the loop is closed: the deadline ends the process
        pass


def _exit_app(app: "App", code: int) -> None:
    app.workers.cancel_all()
    app.exit(return_code=code)


def _force_exit(app: "App", code: int) -> None:
    """The app did not finish in time (or a second signal came): end the process, resetting the terminal
    first if the app had not left application mode itself."""
    if app.is_running:
        for stream in (sys.__stderr__, sys.__stdout__):
            try:
                if stream is not None and stream.isatty():
                    stream.write(TERMINAL_RESET)
                    stream.flush()
                    break
            except (OSError, ValueError):  # the terminal is gone (SIGHUP): nothing to restore
                continue
    os._exit(code)
