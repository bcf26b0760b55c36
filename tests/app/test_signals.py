"""SIGTERM and SIGHUP end the real app as `q` does: the terminal leaves the alternate screen with mouse
reporting off, and the exit code is 128 + the signal."""

from __future__ import annotations

import os
import pty
import signal
import subprocess
import sys

import pytest

from tests.app.helpers import read_pty

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals and a pseudo-terminal")

ALT_SCREEN_ON = b"\x1b[?1049h"
ALT_SCREEN_OFF = b"\x1b[?1049l"
MOUSE_OFF = b"\x1b[?1000l"


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP], ids=["SIGTERM", "SIGHUP"])
def test_a_signal_restores_the_terminal_and_exits_with_its_code(tmp_path, sig):
    master, slave = pty.openpty()
    env = dict(os.environ, TERM="xterm-256color", COLUMNS="100", LINES="30",
               TORCHPERF_HISTORY=str(tmp_path / "h.jsonl"))
    proc = subprocess.Popen([sys.executable, "-m", "torchperf_tui", "--device", "cpu"], stdin=slave,
                            stdout=slave, stderr=slave, env=env, close_fds=True, start_new_session=True)
    os.close(slave)
    out = bytearray()
    try:
        assert read_pty(master, proc, out, lambda o: ALT_SCREEN_ON in o, 30), "the app never entered application mode"
        assert read_pty(master, proc, out, lambda o: b"Quit" in o, 30), "the first frame never painted"
        proc.send_signal(sig)
        read_pty(master, proc, out, lambda o: b"\x00never" in o, 10)  # drain until the child closes the terminal
        code = proc.wait(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(master)
    assert code == 128 + int(sig)
    tail = bytes(out[out.rindex(ALT_SCREEN_ON):])
    assert ALT_SCREEN_OFF in tail, "still in the alternate screen"
    assert MOUSE_OFF in tail, "mouse reporting left on"


STUCK_APP = """
import os, time
from textual.app import App
from torchperf_tui.app.signals import exit_on_signals

class Stuck(App):
    def on_load(self):
        exit_on_signals(self)

    def on_mount(self):
        os.write(1, b"stuck\\n")
        while True:  # a handler that never gives the event loop back
            time.sleep(0.01)

Stuck().run(headless=True)
"""


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP], ids=["SIGTERM", "SIGHUP"])
def test_a_signal_ends_an_app_whose_event_loop_never_comes_back(sig):
    """The handlers were the event loop's, which run only when the loop gets back to its selector: an app
    spinning in a handler (TERM=dumb did) ignored SIGTERM and outlived its terminal. Now it ends within the
    deadline, with the signal's exit code."""
    from torchperf_tui.app.signals import FORCE_AFTER_S

    proc = subprocess.Popen([sys.executable, "-c", STUCK_APP], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    try:
        assert proc.stdout.readline() == b"stuck\n"
        proc.send_signal(sig)
        code = proc.wait(timeout=FORCE_AFTER_S + 20)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert code == 128 + int(sig)
