"""`torchperf-tui`: the app with no command, a headless command for scripts otherwise; one line and exit 2 for bad
input, never a traceback.

Above both front ends, which never import each other: the arguments are parsed by the CLI's parser (cli/args.py,
which knows the app's options too), then the app is started (app/launch.py) or the command run (cli/commands.py).
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Sequence

from torchperf_tui.app.launch import run_tui
from torchperf_tui.cli.args import EXIT_BAD_INPUT, EXIT_FAILURE, build_parser
from torchperf_tui.core.errors import PROG, MeasurementBug, TorchperfError
from torchperf_tui.core.kept_files import HISTORY_ENV
from torchperf_tui.measure.ending import Terminated, ending_on_signals


def parse(argv: list[str]) -> argparse.Namespace:
    """Starting the app needs only the top-level options (the commands' parsers cost milliseconds of its first
    frame); anything else (a command, help, a word that is neither) goes through the whole parser, which gives the
    usual messages."""
    if not any(a in ("-h", "--help") for a in argv):
        args, extra = build_parser(commands=False).parse_known_args(argv)
        if not extra:
            args.command = None
            return args
    from torchperf_tui.cli.baseline import baseline_requested  # the commands' modules: not on the app's path

    args = build_parser(baseline=baseline_requested(argv)).parse_args(argv)
    args.argv = argv  # compare --baseline tells the options typed from argparse's defaults
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse(list(sys.argv[1:] if argv is None else argv))
    if getattr(args, "history", None):  # the history in use, for the measurement process too: no output of
        os.environ[HISTORY_ENV] = args.history  # either process is written over it (core/kept_files.py)
    try:
        if args.command is None:
            return run_tui(args)  # the app handles SIGTERM and SIGHUP itself (app/signals.py)
        from torchperf_tui.cli.commands import COMMANDS  # every command's module: not on the app's path

        with ending_on_signals():  # the measurement process stopped and its empty log removed on the way out
            return COMMANDS[args.command](args)
    except Terminated as exc:
        try:
            print(f"{PROG}: terminated ({exc})", file=sys.stderr)
        except (OSError, ValueError):  # SIGHUP: the terminal is gone
            pass
        return 128 + exc.signum
    except TorchperfError as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # a bug, not bad input: still one line, the traceback on request

        if os.environ.get("TORCHPERF_DEBUG"):
            raise
        lines = str(exc).strip().splitlines()
        message = lines[0] if lines else ""
        if not isinstance(exc, MeasurementBug):  # that one is 'Type: message' already (the traceback: stderr)
            message = f"{type(exc).__name__}: {message}"
        print(f"{PROG}: internal error: {message} (set TORCHPERF_DEBUG=1 for the traceback)", file=sys.stderr)
        return EXIT_FAILURE


if __name__ == "__main__":
    raise SystemExit(main())
