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


def no_job_sent(monkeypatch, owner, before: str) -> list:
    """`owner.run_job` replaced by one that fails the test, saying the job was sent before `before`: the list of the
    kinds sent (none may be)."""
    sent: list = []

    def send(kind, params, what, **callbacks):
        sent.append(kind)
        raise AssertionError(f"a {kind} job was sent before {before}")

    monkeypatch.setattr(owner, "run_job", send)
    return sent
