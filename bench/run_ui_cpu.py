"""The app's own CPU while it draws a CPU run live, and whether the run was called disturbed for it.

On a 2-core box the app shares the cores with the run it shows: what it takes while the histogram fills is what
the run's host check (engine/hardware/host_noise.py) sees as other processes. For each round and each checkout
given (`--tree`, a folder holding tui/; the first is this one), the app is started in an 80x24 tmux session as a
user would (`--model MODEL`), left to load, `r` pressed, and the run read back from the history file once it is
there; the app process's CPU time (utime + stime from /proc) from the key to the record, over that wall time, is
its share of a core. Beside it, what the run's host check read over the timed window: the other processes' cores
(the app among them) and the marks. Checkouts alternate within a round, so they share the box's moments.

    .venv/bin/python bench/run_ui_cpu.py [--model resnet50] [--rounds 3] [--tree ../old-checkout]
Run it on a quiet box: nothing else may use the cores it reads.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import time
from pathlib import Path

from tmux_app import app_in_tmux, cpu_seconds, require_tmux, send_keys  # bench/tmux_app.py

ROOT = Path(__file__).resolve().parents[1]



def app_pid(session: str, timeout: float = 30.0) -> int:
    """The app's Python process in the tmux pane (the pane's command execs it)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        pid = int(subprocess.run(["tmux", "display", "-p", "-t", session, "#{pane_pid}"], capture_output=True,
                                 text=True, check=True).stdout)
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            if b"torchperf_tui" in fh.read():
                return pid
        time.sleep(0.2)
    raise SystemExit("the app's process was not found")


def records(history: Path) -> list[dict]:
    if not history.exists():
        return []
    return [json.loads(line) for line in history.read_text().splitlines() if line.strip()]


def one_run(tree: Path, model: str, settle: float, python: str) -> tuple[float, dict]:
    """(the app's share of a core from r to the record, the record)."""
    history = Path(f"/tmp/run-ui-cpu-{os.getpid()}.jsonl")
    history.unlink(missing_ok=True)
    session = f"runuicpu{os.getpid()}"
    command = (f"TORCHPERF_HISTORY={history} PYTHONPATH={tree / 'tui'} exec {python} -m torchperf_tui "
               f"--model {model}")
    with app_in_tmux(command, session):
        pid = app_pid(session)
        time.sleep(settle)  # the engine, the catalogue and the model's analysis, behind the first frame
        t0, c0 = time.monotonic(), cpu_seconds(pid)
        send_keys(session, "r")
        deadline = t0 + 300
        while not records(history) and time.monotonic() < deadline:
            time.sleep(0.1)
        share = (cpu_seconds(pid) - c0) / (time.monotonic() - t0)
    found = records(history)
    history.unlink(missing_ok=True)
    if not found:
        raise SystemExit(f"no run was recorded within 300 s ({tree})")
    return share, found[-1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="resnet50")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--settle", type=float, default=25.0, help="seconds between the start and r")
    parser.add_argument("--tree", type=Path, action="append", default=[],
                        help="another checkout to time beside this one (again for more)")
    args = parser.parse_args()
    require_tmux()
    trees = [ROOT, *args.tree]
    python = os.environ.get("PYTHON", str(ROOT / ".venv" / "bin" / "python"))
    print(f"the app's CPU while it draws a run of {args.model} (CPU, 64 timed iterations, the app's defaults), "
          f"80x24 in tmux, {os.cpu_count()} cores, {args.rounds} rounds alternating")
    shares: dict[Path, list[float]] = {tree: [] for tree in trees}
    for round_ in range(1, args.rounds + 1):
        for tree in trees:
            share, record = one_run(tree, args.model, args.settle, python)
            shares[tree].append(share)
            noise = record.get("details", {}).get("host_noise") or {}
            others, own = noise.get("other_busy_cores"), noise.get("own_busy_cores")
            marks = "; ".join(record.get("disturbed") or []) or "not disturbed"
            print(f"round {round_} {tree.name:<12} app {share:.2f} of a core · the run's window: others "
                  f"{others if others is None else f'{others:.2f}'}, its own "
                  f"{own if own is None else f'{own:.2f}'} cores · p50 {record['stats']['p50_ms']:.1f} ms · {marks}")
    for tree, values in shares.items():
        values.sort()
        print(f"{tree.name:<12} app's share of a core while the run is drawn: median {values[len(values) // 2]:.2f} "
              f"({' '.join(f'{v:.2f}' for v in values)})")


if __name__ == "__main__":
    main()
