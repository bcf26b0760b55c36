"""SIGTERM and SIGHUP end the app the way `q` does, so the terminal is given back as it was found.

Python's default for both is to die at once, which leaves the terminal in the alternate screen with mouse
reporting on (an SSH connection that drops sends SIGHUP). Here the first signal asks the app to exit through
its event loop (the driver then leaves application mode); if the app has not finished within
FORCE_AFTER_S (a worker stuck in C++), the terminal's modes are reset by hand and the process ends. The exit
code is 128 + the signal's number, as a shell reports a process killed by it.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import threading
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from textual.app import App

EXIT_SIGNALS = (signal.SIGTERM, signal.SIGHUP)
FORCE_AFTER_S = 3.0
# What Textual's Linux driver writes when it leaves application mode: mouse reporting, bracketed paste and
# focus events off, the cursor shown, the alternate screen left.
TERMINAL_RESET = ("\x1b[?1000l\x1b[?1003l\x1b[?1015l\x1b[?1006l\x1b[?2004l\x1b[?1004l\x1b[<u"
                  "\x1b[?1049l\x1b[?25h")


def exit_on_signals(app: "App") -> None:
    """Install the handlers on the running event loop (call from the app's `on_load` or `on_mount`)."""
    loop = asyncio.get_running_loop()
    for sig in EXIT_SIGNALS:
        try:
            loop.add_signal_handler(sig, _exit_on, app, sig)
        except (NotImplementedError, RuntimeError, ValueError):  # not the main thread, or not POSIX
            return


def _exit_on(app: "App", sig: signal.Signals) -> None:
    code = 128 + int(sig)
    if getattr(app, "_signal_exit_code", None) is not None:  # a second signal: do not wait any longer
        _force_exit(app, code)
    app._signal_exit_code = code  # type: ignore[attr-defined]
    app.workers.cancel_all()
    app.exit(return_code=code)
    timer = threading.Timer(FORCE_AFTER_S, _force_exit, args=(app, code))
    timer.daemon = True
    timer.start()


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
