"""Idle CPU of the running app: torchperf-tui in tmux (80x24) with telemetry at 2 Hz, no run in flight.

The app is started, given time to load the engine, switched to a tab, and its process's CPU time
(utime + stime from /proc) is read over a window; the result is the share of one core it used. The
budget (../shared/DESIGN.md) is < 3 % of a core with telemetry at 2 Hz. The Memory tab is the costly
one: its chart is redrawn as samples arrive.

    .venv/bin/python bench/idle_cpu.py [--seconds 60]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time

from tmux_app import app_in_tmux, cpu_seconds, require_tmux, send_keys  # bench/tmux_app.py


def app_pid(session: str, timeout: float = 30.0) -> int:
    """The Python process of the app inside the tmux pane (not the pane's shell)."""
    shell = int(subprocess.run(["tmux", "display", "-p", "-t", session, "#{pane_pid}"], capture_output=True,
                               text=True, check=True).stdout)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        children = subprocess.run(["pgrep", "-P", str(shell)], capture_output=True, text=True).stdout.split()
        for pid in [shell, *map(int, children)]:
            with open(f"/proc/{pid}/cmdline", "rb") as fh:
                cmd = fh.read()
            if b"python" in cmd and b"torchperf-tui" in cmd:
                return pid
        time.sleep(0.2)
    raise SystemExit("the app's process was not found")


def measure(tab: str, seconds: float, history: str) -> float:
    session = f"idlecpu{os.getpid()}"
    exe = os.path.join(os.path.dirname(sys.executable), "torchperf-tui")
    command = f"TORCHPERF_HISTORY={history} exec {sys.executable} {exe} --interval 0.5"
    with app_in_tmux(command, session):
        pid = app_pid(session)
        time.sleep(15)  # the engine loads behind the first frame; let it finish
        send_keys(session, tab)
        time.sleep(3)
        t0, c0 = time.monotonic(), cpu_seconds(pid)
        time.sleep(seconds)
        return 100.0 * (cpu_seconds(pid) - c0) / (time.monotonic() - t0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=60.0)
    args = parser.parse_args()
    require_tmux()
    history = f"/tmp/idle-cpu-history-{os.getpid()}.jsonl"
    print(f"torchperf-tui idle CPU, telemetry 2 Hz, 80x24 in tmux, {args.seconds:.0f} s per tab, "
          f"{os.cpu_count()} cores")
    for tab, name in (("1", "Timing"), ("5", "Memory")):
        share = measure(tab, args.seconds, history)
        verdict = "within" if share < 3.0 else "OVER"
        print(f"{name:<7} tab: {share:.2f} % of a core ({verdict} the 3 % budget)")


if __name__ == "__main__":
    main()
