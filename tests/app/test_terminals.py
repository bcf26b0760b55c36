"""Terminals as they come: NO_COLOR, TERM=dumb, 16 colours, COLUMNS/LINES. The app draws and quits normally, and
ends on SIGTERM, SIGHUP and its terminal closing, leaving no process behind."""

from __future__ import annotations

import pytest

from tests.app.helpers import FrozenTelemetry, read_pty, run_and_wait, wait_until


def screen_text(app) -> str:
    """What the terminal shows, as plain text (rendered through the app's filters, as a frame is)."""
    return "\n".join(strip.text for strip in app.screen._compositor.render_strips())


async def test_no_color_draws_a_run_and_the_memory_tab(tiny_app, monkeypatch):
    """NO_COLOR=1 (read by Textual when the app is made): a finished run's histogram and the Memory tab's plot
    draw, and the app quits normally. Textual's monochrome filter ended both in a traceback (exit 1)."""
    monkeypatch.setenv("NO_COLOR", "1")
    async with tiny_app(telemetry=FrozenTelemetry(gpu=False)) as pilot:
        app = pilot.app
        assert app.no_color
        await run_and_wait(pilot)
        await wait_until(pilot, lambda: app.session.runs.get(1).status == "done", what="run #1 done")
        await pilot.pause(0.3)
        await pilot.press("5")
        await wait_until(pilot, lambda: app.main.active_tab() == "memory", what="the Memory tab")
        await wait_until(pilot, lambda: "seconds ago" in screen_text(app), what="the memory plot")
        assert "RSS" in screen_text(app)
        assert app.is_running and app._exception is None
        await pilot.press("q")
    assert app.return_code == 0


# -- the real app in a pseudo-terminal ------------------------------------------------------------------------
# Each case starts `python -m torchperf_tui` on a pty that is its controlling terminal, with a real window size
# (100x30) and no COLUMNS/LINES unless the case sets them, waits until the panes are up and the measurement
# process runs, ends it one way, and checks that both processes are gone.

WINDOW = (100, 30)
DRAWN = b"pick a model"  # the Timing pane's line once the panes are mounted and the catalogue listed
TERMINAL_ENV = ("TERM", "COLORTERM", "NO_COLOR", "COLUMNS", "LINES", "TEXTUAL_COLOR_SYSTEM", "FORCE_COLOR")


def _spawn(tmp_path, env: dict[str, str]):
    import fcntl
    import os
    import pty
    import struct
    import subprocess
    import sys
    import termios

    master, slave = pty.openpty()
    fcntl.ioctl(master, termios.TIOCSWINSZ, struct.pack("HHHH", WINDOW[1], WINDOW[0], 0, 0))
    full_env = {k: v for k, v in os.environ.items() if k not in TERMINAL_ENV}
    full_env.update(TORCHPERF_HISTORY=str(tmp_path / "history.jsonl"), **env)

    def controlling_terminal() -> None:  # a session of its own whose terminal is the pty, as a shell gives
        os.setsid()
        fcntl.ioctl(0, termios.TIOCSCTTY, 0)

    proc = subprocess.Popen([sys.executable, "-m", "torchperf_tui", "--device", "cpu"], stdin=slave, stdout=slave,
                            stderr=slave, env=full_env, close_fds=True, preexec_fn=controlling_terminal)
    os.close(slave)
    return proc, master


def _measurement_process(pid: int):
    import psutil

    try:
        for child in psutil.Process(pid).children(recursive=True):
            if "torchperf_tui.measure" in " ".join(child.cmdline()):
                return child
    except psutil.Error:
        pass
    return None


CASES = {
    "dumb-q": ({"TERM": "dumb"}, "q"),
    "dumb-SIGTERM": ({"TERM": "dumb"}, "SIGTERM"),
    "dumb-SIGHUP": ({"TERM": "dumb"}, "SIGHUP"),
    "dumb-terminal-closed": ({"TERM": "dumb"}, "close"),
    "16-colours-terminal-closed": ({"TERM": "xterm"}, "close"),
    "vt100-SIGTERM": ({"TERM": "vt100"}, "SIGTERM"),
    "NO_COLOR-q": ({"TERM": "xterm-256color", "NO_COLOR": "1"}, "q"),
    "COLUMNS-LINES-q": ({"TERM": "xterm-256color", "COLUMNS": "80", "LINES": "24"}, "q"),
}


@pytest.mark.parametrize("env,how", CASES.values(), ids=CASES.keys())
def test_the_app_draws_and_ends_in_this_terminal(tmp_path, env, how):
    """TERM=dumb froze at "loading engine…" at full CPU (two queued sizes made Textual lay the screen out at
    each in turn, forever), ignoring q, SIGTERM and its terminal closing; NO_COLOR ended in a traceback."""
    import os
    import signal
    import sys
    import time

    if sys.platform == "win32":
        pytest.skip("POSIX signals and a pseudo-terminal")
    proc, master = _spawn(tmp_path, env)
    out = bytearray()
    worker = None
    try:
        assert read_pty(master, proc, out, lambda o: DRAWN in o, 90), \
            f"the panes never drew (exit {proc.poll()}): {bytes(out[-400:])!r}"
        deadline = time.monotonic() + 60
        while worker is None and time.monotonic() < deadline:
            worker = _measurement_process(proc.pid)
            read_pty(master, proc, out, lambda o: False, 0.2)
        assert worker is not None, "the measurement process never started"
        if how == "q":
            os.write(master, b"q")
        elif how == "close":
            os.close(master)  # the terminal goes: the kernel hangs it up and sends SIGHUP
            master = None
        else:
            proc.send_signal(getattr(signal, how))
        if master is not None:
            read_pty(master, proc, out, lambda o: proc.poll() is not None, 30)
        code = proc.wait(timeout=30)
        expected = {"q": 0, "SIGTERM": 128 + signal.SIGTERM, "SIGHUP": 128 + signal.SIGHUP,
                    "close": 128 + signal.SIGHUP}[how]
        assert code == expected, bytes(out[-600:])
        worker.wait(timeout=30)  # raises psutil.TimeoutExpired if it outlived the app
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if worker is not None and worker.is_running():
            worker.kill()
        if master is not None:
            os.close(master)
    assert b"Traceback" not in out
    if env.get("TERM") == "xterm":  # 16 colours: no 256-colour or truecolour codes
        assert b"38;5;" not in out and b"38;2;" not in out and b"48;5;" not in out and b"48;2;" not in out


async def test_a_flag_switch_says_on_and_off_in_words(tiny_app):
    """A switch's state is not told by its colour alone (a monochrome terminal, NO_COLOR): "on"/"off" beside it
    follows space at 80x24, the narrowest screen with the sidebar."""
    from textual.widgets import Switch

    async with tiny_app(size=(80, 24)) as pilot:
        app = pilot.app
        row = app.main.query_one("#flag-row-deterministic_algorithms")
        switch = row.query_one(Switch)
        before = switch.value

        def says(value: bool) -> bool:
            line = next(line for line in screen_text(app).splitlines() if "deterministic algos" in line)
            return line.split()[:3] == ["on" if value else "off", "deterministic", "algos"]

        assert says(before), "the state is not in words beside the switch"
        switch.focus()
        await pilot.press("space")
        await wait_until(pilot, lambda: app.pane("flags").flags.deterministic_algorithms != before, what="the flip")
        await wait_until(pilot, lambda: says(not before), what="the new state in words")
        await pilot.press("space")
        await wait_until(pilot, lambda: says(before), what="the state back in words")
