"""An A/A baseline gate on this box, as CI runs it: `bench MODEL --json > base.json` once, then `compare --baseline
base.json` N times (each a fresh CLI process and measurement process, nothing changed), counting the gates that
fail (exit 1). A baseline whose record is marked disturbed (a busy host) is taken again, up to 5 times: a gate
against a disturbed baseline measures the disturbance. The budget (DESIGN.md): at most 1 failure in 20. Each gate's ratio and interval are listed, with the
host's load, so a failure shows whether the box was busy.

    .venv/bin/python bench/baseline_aa.py [--gates 20] [--model resnet18 --input 1,3,64,64 --iters 30 --threads 2]
        [--output bench/results/baseline_aa.txt]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BASELINE_ATTEMPTS = 5


def cli(*argv: str, history: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "TORCHPERF_HISTORY": str(history)}
    return subprocess.run([sys.executable, "-m", "torchperf_tui.cli", *argv], capture_output=True, text=True, env=env,
                          timeout=600)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gates", type=int, default=20)
    parser.add_argument("--model", default="resnet18")
    parser.add_argument("--input", default="1,3,64,64")
    parser.add_argument("--iters", default="30")
    parser.add_argument("--threads", default="2")
    parser.add_argument("--fail-if-slower", default=None, help="the gate's PCT (default: the CLI's own)")
    parser.add_argument("--output", default=str(Path(__file__).parent / "results" / "baseline_aa.txt"))
    args = parser.parse_args()
    lines: list[str] = []

    def say(text: str) -> None:
        print(text, flush=True)
        lines.append(text)

    with tempfile.TemporaryDirectory() as folder:
        history, base = Path(folder) / "history.jsonl", Path(folder) / "base.json"
        for attempt in range(1, BASELINE_ATTEMPTS + 1):  # a baseline taken while the host was busy: again
            made = cli("bench", args.model, "--input", args.input, "--iters", args.iters, "--threads", args.threads,
                       "--json", history=history)
            if made.returncode != 0:
                print(made.stderr, file=sys.stderr)
                return 2
            record = json.loads(made.stdout)["record"]
            if not record.get("disturbed"):
                break
            say(f"baseline attempt {attempt} disturbed, taken again: {'; '.join(record['disturbed'])}")
            time.sleep(10)
        base.write_text(made.stdout)
        say(f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} | {platform.node()} | {os.cpu_count()} CPUs | "
            f"load {os.getloadavg()[0]:.1f} | baseline: bench {args.model} --input {args.input} --iters {args.iters} "
            f"--threads {args.threads} (record {record['id'][:8]}, p50 {record['stats']['p50_ms']:.3f} ms)")
        extra = ["--fail-if-slower", args.fail_if_slower] if args.fail_if_slower else []
        failures, t0 = 0, time.time()
        for i in range(args.gates):
            gate = cli("compare", "--baseline", str(base), "--json", "--no-history", *extra, history=history)
            if gate.returncode not in (0, 1):
                say(f"gate {i + 1}: exit {gate.returncode}: {gate.stderr.strip()[-300:]}")
                return 2
            data = json.loads(gate.stdout)
            failures += gate.returncode == 1
            env = "; ".join(f"{e['name']} {e['baseline']} -> {e['now']}" for e in data["environment"]) or "same"
            say(f"gate {i + 1:2d}: exit {gate.returncode}  {data['verdict']:<6} ratio {data['ratio']:.3f} "
                f"(95 % CI {data['ci_low']:.3f}-{data['ci_high']:.3f}, p={data['p_value']:.2g})  "
                f"load {os.getloadavg()[0]:.1f}  environment: {env}")
        say(f"A/A gate: {failures} of {args.gates} failed (exit 1) at --fail-if-slower "
            f"{data['fail_if_slower_pct']:g} %; budget: at most 1 in 20 "
            f"({'within' if failures <= args.gates / 20 else 'OVER'} it); {time.time() - t0:.0f} s")
    Path(args.output).write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
