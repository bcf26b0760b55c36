"""Does the app disturb what it measures? The same model timed by the headless CLI and by the TUI, interleaved.

For each round and model: `torchperf-tui bench MODEL --json` (one process, nothing else running) and the
real app started in an 80x24 tmux session as a user would (`--model MODEL`), left to settle, `r` pressed,
and its run read back from the history file once it is there. Both use the same warm-up (10) and timed
iterations (50) at batch 1. The ratio TUI/CLI of p50 and of p90 is taken per round; the budget
(../shared/DESIGN.md) is a median ratio within 1.05 for p50 and 1.15 for p90.

The two runs of a round are a minute apart at most, and on a shared 2-core VM the CLI's own p50 can move 2x
between two runs (bench/results/tui_fidelity.txt, 2026-11-29). So the order alternates round by round (CLI
first in odd rounds, the app first in even ones: a drift between the two runs of a round counts against each
side equally often), and the median ratio comes with a bootstrap 90 % interval over the rounds. The verdict is
"within" only where the whole interval is within the budget, "OVER" where the whole interval is above it, and
"not settled" otherwise: more rounds, or a quieter box, are then what it needs, not a reading of its median.

Models: `dispatch_bound:many_tiny_layers` (bench/dispatch_bound.py: 800 tiny layers, all per-op Python: the
case where a UI thread sharing the GIL hurts most) and resnet18.

    PYTHONPATH=tui .venv/bin/python bench/tui_fidelity.py [--rounds 9] [--settle 8]
Run it on a quiet box: it compares timings taken minutes apart.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from intervals import LEVEL, median_interval, verdict  # bench/intervals.py
from tmux_app import app_in_tmux, require_tmux, send_keys  # bench/tmux_app.py

HERE = Path(__file__).resolve().parent
MODELS = ("dispatch_bound:many_tiny_layers", "resnet18")
WARMUP, ITERS = 10, 50
BUDGET = {"p50": 1.05, "p90": 1.15}  # ../shared/DESIGN.md: the median ratio TUI/CLI


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    k = (len(ordered) - 1) * q
    lo, hi = int(k), min(int(k) + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (k - lo)


def cli_run(model: str, env: dict) -> list[float]:
    out = subprocess.run([sys.executable, "-m", "torchperf_tui", "bench", model, "--warmup", str(WARMUP),
                          "--iters", str(ITERS), "--json", "--samples", "--no-history", "--device", "cpu"],
                         capture_output=True, text=True, env=env, cwd=HERE, check=True).stdout
    return json.loads(out)["samples_ms"]


def tui_run(model: str, env: dict, settle: float, history: Path, freeze_ui: float = 0.0) -> list[float]:
    session = f"fidelity{os.getpid()}"
    before = history.read_text().count("\n") if history.exists() else 0
    command = (f"env TORCHPERF_HISTORY={history} PYTHONPATH={env.get('PYTHONPATH', '')} {sys.executable} "
               f"-m torchperf_tui --device cpu --model {model}")
    with app_in_tmux(command, session, cwd=str(HERE)):
        time.sleep(settle)  # the engine loaded, the model analysed, the screen quiet
        send_keys(session, "r")
        if freeze_ui:
            # A diagnosis: the app's own process stopped (SIGSTOP) from 1 s after r for `freeze_ui` s, so
            # nothing of the UI (its redraws, tmux's) runs beside most of the run; its measurement process runs on.
            pid = int(subprocess.run(["tmux", "display", "-p", "-t", session, "#{pane_pid}"], capture_output=True,
                                     text=True, check=True).stdout)
            time.sleep(1.0)
            os.kill(pid, signal.SIGSTOP)
            try:
                time.sleep(freeze_ui)
            finally:
                os.kill(pid, signal.SIGCONT)
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline:
            if history.exists():
                lines = history.read_text().splitlines()
                if len(lines) > before:
                    return json.loads(lines[-1])["samples_ms"]
            time.sleep(0.5)
        raise TimeoutError(f"the TUI's run of {model} did not reach the history")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--settle", type=float, default=8.0, help="seconds between starting the TUI and r")
    parser.add_argument("--models", nargs="*", default=list(MODELS))
    parser.add_argument("--freeze-ui", type=float, default=0.0, metavar="S",
                        help="diagnosis: stop the app's process (not its measurement process) for S seconds from 1 s "
                             "after r, to tell the UI's share of a gap from the measurement process's")
    args = parser.parse_args()
    require_tmux()
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(HERE), env.get("PYTHONPATH", "")) if p)
    import torchperf_tui

    print(f"torchperf_tui from {Path(torchperf_tui.__file__).parent}, {os.cpu_count()} CPUs, "
          f"load {os.getloadavg()[0]:.2f}; {args.rounds} interleaved rounds (CLI first in odd rounds, the app in "
          f"even ones), warm-up {WARMUP}, {ITERS} timed, batch 1, CPU")
    ratios: dict[str, dict[str, list[float]]] = {m: {"p50": [], "p90": []} for m in args.models}
    cli_p50s: dict[str, list[float]] = {m: [] for m in args.models}
    with tempfile.TemporaryDirectory() as tmp:
        history = Path(tmp) / "history.jsonl"
        for round_ in range(1, args.rounds + 1):
            for model in args.models:
                if round_ % 2:
                    cli = cli_run(model, env)
                    tui = tui_run(model, env, args.settle, history, args.freeze_ui)
                else:
                    tui = tui_run(model, env, args.settle, history, args.freeze_ui)
                    cli = cli_run(model, env)
                cli_p50s[model].append(percentile(cli, 0.5))
                row = []
                for name, q in (("p50", 0.5), ("p90", 0.9)):
                    c, t = percentile(cli, q), percentile(tui, q)
                    ratios[model][name].append(t / c)
                    row.append(f"{name} CLI {c:.3f} ms TUI {t:.3f} ms ({t / c:.2f}x)")
                print(f"round {round_} {model:<32} " + "  ".join(row), flush=True)
    print()
    ok = True
    for model, by in ratios.items():
        parts = []
        for name in ("p50", "p90"):
            low, high = median_interval(by[name])
            said = verdict(low, high, BUDGET[name])
            ok &= said == "within"
            parts.append(f"{name} {statistics.median(by[name]):.2f}x [{low:.2f}-{high:.2f}] "
                         f"(budget {BUDGET[name]}): {said}")
        spread = cli_p50s[model]
        print(f"{model:<32} median ratio TUI/CLI [{LEVEL:.0%} interval]: " + ", ".join(parts)
              + f"; the CLI's own p50 {min(spread):.3f}-{max(spread):.3f} ms over the rounds")
    print(f"load at the end {os.getloadavg()[0]:.2f}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
