"""Does the app disturb what it measures? The same model timed by the headless CLI and by the TUI, interleaved.

For each round and model: `torchperf-tui bench MODEL --json` (one process, nothing else running), then the
real app started in an 80x24 tmux session as a user would (`--model MODEL`), left to settle, `r` pressed,
and its run read back from the history file once it is there. Both use the same warm-up (10) and timed
iterations (50) at batch 1. The ratio TUI/CLI of p50 and of p90 is taken per round; the budget
(../shared/DESIGN.md) is a median ratio within 1.05 for p50 and 1.15 for p90.

Models: `dispatch_bound:many_tiny_layers` (bench/dispatch_bound.py: 800 tiny layers, all per-op Python: the
case where a UI thread sharing the GIL hurts most) and resnet18.

    PYTHONPATH=tui .venv/bin/python bench/tui_fidelity.py [--rounds 3] [--settle 8]
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

from tmux_app import app_in_tmux, require_tmux, send_keys  # bench/tmux_app.py

HERE = Path(__file__).resolve().parent
MODELS = ("dispatch_bound:many_tiny_layers", "resnet18")
WARMUP, ITERS = 10, 50


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
    parser.add_argument("--rounds", type=int, default=3)
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
          f"load {os.getloadavg()[0]:.2f}; {args.rounds} interleaved rounds, warm-up {WARMUP}, {ITERS} timed, "
          "batch 1, CPU")
    ratios: dict[str, dict[str, list[float]]] = {m: {"p50": [], "p90": []} for m in args.models}
    with tempfile.TemporaryDirectory() as tmp:
        history = Path(tmp) / "history.jsonl"
        for round_ in range(1, args.rounds + 1):
            for model in args.models:
                cli = cli_run(model, env)
                tui = tui_run(model, env, args.settle, history, args.freeze_ui)
                row = []
                for name, q in (("p50", 0.5), ("p90", 0.9)):
                    c, t = percentile(cli, q), percentile(tui, q)
                    ratios[model][name].append(t / c)
                    row.append(f"{name} CLI {c:.3f} ms TUI {t:.3f} ms ({t / c:.2f}x)")
                print(f"round {round_} {model:<32} " + "  ".join(row), flush=True)
    print()
    ok = True
    for model, by in ratios.items():
        p50, p90 = statistics.median(by["p50"]), statistics.median(by["p90"])
        within = p50 <= 1.05 and p90 <= 1.15
        ok &= within
        print(f"{model:<32} median ratio TUI/CLI: p50 {p50:.2f}x (budget 1.05), p90 {p90:.2f}x (budget 1.15): "
              f"{'within' if within else 'OVER'}")
    print(f"load at the end {os.getloadavg()[0]:.2f}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
