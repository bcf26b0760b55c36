"""What one CLI command costs the box: wall time, and the CPU and memory of its measurement process.

Every command runs its job in a measurement process that imports torch; on a 2-core box that start is most of
what a short command costs, and the app pays it too at each start (and again after a model kills its process).
For each round and each checkout given (`--tree`, a folder holding tui/; the first is this one), the command
`bench tests.tinymodels:tiny_cnn --input 1x3x32x32 --iters 5 --warmup 1` is run as a user types it; its wall time,
the CPU time (user + system) of the processes it started (the measurement process) and their peak RSS are read
from the kernel's account of the children it waited for. Checkouts alternate within a round, so they share the
box's moments.

    .venv/bin/python bench/command_cost.py [--rounds 5] [--tree ../old-checkout]
Run it on a quiet box: nothing else may use the cores.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
COMMAND = ["bench", "tests.tinymodels:tiny_cnn", "--input", "1x3x32x32", "--iters", "5", "--warmup", "1"]

# Runs in a fresh interpreter: the command as `torchperf-tui` runs it, then what its children took.
PROBE = """
import json, resource, sys, time
from torchperf_tui.entry import main
sys.argv = ["torchperf-tui", *sys.argv[1:]]
t0 = time.perf_counter()
try:
    main()
    code = 0
except SystemExit as exc:
    code = exc.code
wall = time.perf_counter() - t0
own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
print(json.dumps({"code": code, "wall": wall, "own_cpu": own.ru_utime + own.ru_stime,
                  "child_cpu": kids.ru_utime + kids.ru_stime, "child_rss_mb": kids.ru_maxrss / 1024}),
      file=sys.stderr)
"""


def one_command(tree: Path) -> dict:
    env = {**os.environ, "PYTHONPATH": f"{tree / 'tui'}{os.pathsep}{tree}"}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    done = subprocess.run([sys.executable, "-c", PROBE, *COMMAND], cwd=tree, env=env, capture_output=True, text=True,
                          timeout=600)
    result = json.loads(done.stderr.strip().splitlines()[-1])
    if result["code"] not in (0, None):
        raise SystemExit(f"{tree}: the command failed: {done.stderr.strip()[-400:]}")
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--tree", action="append", default=[], help="another checkout to compare (a folder with tui/)")
    args = parser.parse_args()
    trees = [ROOT, *[Path(tree).resolve() for tree in args.tree]]
    names = ["this"] + [tree.name for tree in trees[1:]]
    for tree in trees:
        one_command(tree)  # warm the file cache and the catalogue cache before anything is timed
    rows: dict[str, list[dict]] = {name: [] for name in names}
    print(f"`torchperf-tui {' '.join(COMMAND)}`, {os.cpu_count()} cores, {args.rounds} rounds alternating")
    for round_no in range(1, args.rounds + 1):
        for name, tree in zip(names, trees):
            result = one_command(tree)
            rows[name].append(result)
            print(f"round {round_no} {name:12s} wall {result['wall']:5.2f} s · measurement process "
                  f"{result['child_cpu']:5.2f} s of CPU, {result['child_rss_mb']:4.0f} MB peak · the command's own "
                  f"{result['own_cpu']:4.2f} s", flush=True)
    for name in names:
        median = {key: statistics.median(row[key] for row in rows[name])
                  for key in ("wall", "child_cpu", "child_rss_mb", "own_cpu")}
        print(f"{name:12s} median: wall {median['wall']:.2f} s, measurement process {median['child_cpu']:.2f} s of "
              f"CPU and {median['child_rss_mb']:.0f} MB, the command's own {median['own_cpu']:.2f} s")
    print(time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()))


if __name__ == "__main__":
    main()
