"""Time to first frame: torchperf-tui against a bare Textual app (Header, Static, Footer), both in tmux.

Each app is started in a fresh 80x24 tmux session and the pane is polled until the app's marker text is on
screen; the elapsed wall time is the time a user waits for something to look at. The budget is
../shared/DESIGN.md's, 1.3x the bare app (issue 11 aimed at 1.15x: said beside it): the UI process never imports
torch (the measurement process does, after the first frame), and plotting loads behind it.

The marker is the header's title, which every frame shows from the first, at any size. It was the sidebar's
title, 'Model', until issue 22: at 80x24 the short layout hides that title, so it showed, if at all, only in
the first frame, for the few milliseconds before the screen fitted its layout, and the poll caught it by
chance; otherwise 'Model' came with the footer's keys once the panes had mounted, 0.4-0.6 s later. That made
the starts look bimodal and ~3x the bare app. Each app's processes (the measurement process, which imports
torch for seconds, included) are gone before the next start, so no start shares the CPUs with the one before.

    .venv/bin/python bench/first_frame.py [--runs 15]

Each run starts both apps back to back, the bare one first in even runs and this one first in odd ones; the
verdict reads the bootstrap interval of the median ratio over the runs' pairs (bench/intervals.py).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

from intervals import LEVEL, median_interval, verdict  # bench/intervals.py

BUDGET = 1.3  # ../shared/DESIGN.md: the app's first frame within 1.3x a bare Textual app's
BARE_APP = '''
from textual.app import App
from textual.widgets import Footer, Header, Static

class Bare(App):
    def compose(self):
        yield Header()
        yield Static("bare textual app")
        yield Footer()

Bare().run()
'''


def _session_alive(sid: int) -> bool:
    """Some process is still in the session `sid` (the pane's process and what it started: they keep its id)."""
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if os.getsid(int(entry)) == sid:
                    return True
            except OSError:  # gone meanwhile
                continue
    return False


def time_to_marker(tmux: list[str], command: str, marker: str, timeout: float = 30.0) -> float:
    """Seconds from starting `command` in a new 80x24 session of the tmux server `tmux` (its command line) until
    `marker` is on screen; the session's processes have all exited when this returns."""
    session = "app"
    subprocess.run([*tmux, "kill-session", "-t", session], capture_output=True, check=False)
    t0 = time.perf_counter()
    subprocess.run([*tmux, "new-session", "-d", "-s", session, "-x", "80", "-y", "24", command], check=True)
    # The pane's process leads a session of its own (tmux calls setsid); its children stay in it.
    pane_pid = int(subprocess.run([*tmux, "display-message", "-p", "-t", session, "#{pane_pid}"],
                                  capture_output=True, text=True, check=False).stdout.strip() or 0)
    try:
        screen = ""
        while time.perf_counter() - t0 < timeout:
            screen = subprocess.run([*tmux, "capture-pane", "-p", "-t", session],
                                    capture_output=True, text=True, check=False).stdout
            if marker in screen:
                return time.perf_counter() - t0
            time.sleep(0.005)
        alive = "alive" if pane_pid and _session_alive(pane_pid) else "gone"
        raise TimeoutError(f"{marker!r} did not appear within {timeout} s: {command} (its processes: {alive}; "
                           f"the pane read: {screen.strip()[:400]!r})")
    finally:
        subprocess.run([*tmux, "kill-session", "-t", session], capture_output=True, check=False)
        # Wait for the app and its measurement process to exit before the next start. A fixed 0.3 s was short of
        # it: torchperf-tui's measurement process, still importing torch, went ~3 s after the SIGHUP (the client's
        # stop grace, then the app's signal deadline), on the CPUs of the next two starts.
        deadline = time.perf_counter() + 15.0
        while pane_pid and _session_alive(pane_pid) and time.perf_counter() < deadline:
            time.sleep(0.05)
        time.sleep(0.3)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--marker", default="torchperf", help="text that shows torchperf-tui's first frame")
    args = parser.parse_args()
    if shutil.which("tmux") is None:
        print("tmux is needed: apt-get install tmux", file=sys.stderr)
        return 1
    python = sys.executable
    # Bytecode as an installed package has it (pip compiles at install): this environment sets
    # PYTHONDONTWRITEBYTECODE, so an edited module would otherwise be compiled from source at every start.
    import compileall

    import torchperf_tui

    compileall.compile_dir(os.path.dirname(torchperf_tui.__file__), quiet=1)
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as fh:
        fh.write(BARE_APP)
        bare_script = fh.name
    env = "TORCHPERF_HISTORY=/tmp/torchperf-first-frame-history.jsonl"
    apps = {
        "bare textual": (f"{python} {bare_script}", "bare textual app"),
        "torchperf-tui": (f"env {env} {python} -m torchperf_tui", args.marker),
    }
    import textual

    print(f"python {sys.version.split()[0]}, textual {textual.__version__}, {os.cpu_count()} CPUs, "
          f"{args.runs} runs each, alternating, 80x24 tmux")
    times: dict[str, list[float]] = {name: [] for name in apps}
    # A tmux server of the bench's own, started before the first start and kept up by an idle session. A pane
    # gets the environment of the server it runs in: a shared one (the default socket, started by whoever came
    # first) handed the app that process's PYTHONPATH and bytecode settings. A server with no session left exits,
    # and the next start started one inside its timing. Another tmux user could end a shared server's sessions.
    socket_dir = tempfile.mkdtemp(prefix="first-frame-")
    tmux = ["tmux", "-S", os.path.join(socket_dir, "tmux")]
    subprocess.run([*tmux, "new-session", "-d", "-s", "keep", "sleep 86400"], check=True)
    try:
        for run in range(args.runs):  # the bare app first in even runs, the app in odd ones
            for name, (command, marker) in (apps.items() if run % 2 == 0 else reversed(apps.items())):
                times[name].append(time_to_marker(tmux, command, marker))
    finally:
        subprocess.run([*tmux, "kill-server"], capture_output=True, check=False)
        shutil.rmtree(socket_dir, ignore_errors=True)
    for name, values in times.items():
        print(f"{name:>14}: median {statistics.median(values):.3f} s  "
              f"(min {min(values):.3f}, max {max(values):.3f})")
        print(f"{'':>14}  each: {' '.join(f'{value:.3f}' for value in sorted(values))}")
    ratio = statistics.median(times["torchperf-tui"]) / statistics.median(times["bare textual"])
    pairs = [app / bare for app, bare in zip(times["torchperf-tui"], times["bare textual"])]
    low, high = median_interval(pairs)
    print(f"ratio of medians {ratio:.2f}x; median ratio of the {len(pairs)} pairs {statistics.median(pairs):.2f}x "
          f"[{LEVEL:.0%} interval {low:.2f}-{high:.2f}] (budget {BUDGET}x, DESIGN.md): {verdict(low, high, BUDGET)}; "
          f"issue 11's aim of 1.15x: {verdict(low, high, 1.15)}")
    os.unlink(bare_script)
    return 0


if __name__ == "__main__":
    sys.exit(main())
