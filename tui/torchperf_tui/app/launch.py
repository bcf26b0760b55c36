"""How the app is started from the command line: on a terminal only, with the options the parser read."""

from __future__ import annotations

import sys

from torchperf_tui.core.errors import PROG, TorchperfError


def run_tui(args) -> int:
    """The app with the options the parser read; a TorchperfError where there is no terminal to draw on."""
    missing = terminal_missing()
    if missing:
        raise TorchperfError(f"the app needs a terminal, and {missing}: run it in one (over SSH: ssh -t), or use a "
                             f"command for scripts (e.g. {PROG} bench MODEL)")
    # Textual: not on the commands' path (entry.py imports this module)
    from torchperf_tui.app.factory import app_options, make_app

    app = make_app(**app_options(args))
    app.run()
    return app.return_code or 0


def terminal_missing() -> str:
    """Why the app cannot draw or read keys here ('' when it can). Started with its output in a file or a pipe,
    the app drew escape codes into it at full speed and never saw a key: a hang that filled a disk."""
    for name, stream in (("stdin", sys.stdin), ("stdout", sys.stdout)):
        try:
            if stream is None or not stream.isatty():
                return f"its {name} is not one"
        except (AttributeError, ValueError, OSError):  # closed, or not a real file
            return f"its {name} is not one"
    return ""


