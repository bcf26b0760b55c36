"""The CLI run in the test's process: its exit code (argparse's own usage errors too), stdout and stderr."""

from __future__ import annotations

from torchperf_tui.entry import main


def run(capsys, *argv):
    try:
        code = main(list(argv))
    except SystemExit as exit_:  # argparse's own usage errors
        code = exit_.code
    out, err = capsys.readouterr()
    return code, out, err
