"""How the app is started from the command line: on a terminal only, with the options the parser read."""

from __future__ import annotations

import sys

from torchperf_tui.app.demo_attention import demo_inputs
from torchperf_tui.core.errors import PROG, TorchperfError


def run_tui(args) -> int:
    """The app with the options the parser read; a TorchperfError where there is no terminal to draw on."""
    missing = terminal_missing()
    if missing:
        raise TorchperfError(f"the app needs a terminal, and {missing}: run it in one (over SSH: ssh -t), or use a "
                             f"command for scripts (e.g. {PROG} bench MODEL)")
    from torchperf_tui.app.app import TorchperfApp  # Textual: not on the commands' path (entry.py imports this)

    model_args, seq_len = args.app_model_args or "", args.app_seq_len or ""
    if args.demo is not None:  # a transformers demo's small config and length
        model_args, seq_len = demo_inputs(args.demo, model_args, seq_len)
    app = TorchperfApp(model=args.demo or args.model, autostart=args.autostart, interval=args.interval,
                       device=args.app_device, history_path=args.history, demo=args.demo is not None,
                       screenshot_dir=args.screenshot_dir, model_args=model_args, seq_len=seq_len,
                       mlflow_uri=getattr(args, "app_mlflow", None))
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


