"""False positives and power of the A/B verdict on a real model, on this machine.

Runs >= 40 A/A trials (two identical arms) and counts how often the verdict calls a difference at alpha
0.05 (target <= 5 %), then as many trials of a real difference, threads 1 vs 2 by default, and counts
how often it is detected (target >= 95 %).

    .venv/bin/python bench/aa_false_positives.py [--trials 40] [--model resnet18 --input 1x3x64x64]
"""

from __future__ import annotations

import argparse
import platform
import sys
import time

import torch

from torchperf_tui.engine.measurements.ab_arms import parse_arm_spec
from torchperf_tui.engine.measurements.abtest import run_ab
from torchperf_tui.engine.workloads.inputs import parse_shape
from torchperf_tui.engine.measurements.bench_config import BenchConfig


def rate(base: BenchConfig, a: str, b: str, trials: int, blocks: int, per_block: int) -> tuple[float, list]:
    verdicts = []
    for trial in range(trials):
        result = run_ab(base, parse_arm_spec(a), parse_arm_spec(b), blocks=blocks, per_block=per_block,
                        seed=trial)
        verdicts.append(result.verdict)
    return sum(v.significant for v in verdicts) / trials, verdicts


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="resnet18")
    parser.add_argument("--input", default="1x3x64x64")
    parser.add_argument("--trials", type=int, default=40)
    parser.add_argument("--blocks", type=int, default=10)
    parser.add_argument("--per-block", type=int, default=10)
    parser.add_argument("--a", default="threads=1", help="arm of the real difference")
    parser.add_argument("--b", default="threads=2", help="the other arm of the real difference")
    args = parser.parse_args()
    base = BenchConfig(model=args.model, input_shape=parse_shape(args.input), device="cpu")
    print(f"torch {torch.__version__} | {platform.machine()} | {torch.get_num_threads()} threads | "
          f"{args.model} {args.input} | {args.trials} trials x {args.blocks} blocks/arm x {args.per_block} "
          "iterations/block")
    t0 = time.time()
    fp, aa = rate(base, "", "", args.trials, args.blocks, args.per_block)
    print(f"A/A (identical arms): {fp * 100:.1f} % called significant at alpha 0.05 "
          f"(target <= 5 %); ratios {min(v.ratio for v in aa):.3f}-{max(v.ratio for v in aa):.3f} "
          f"[{time.time() - t0:.0f} s]")
    t0 = time.time()
    power, ab = rate(base, args.a, args.b, args.trials, args.blocks, args.per_block)
    print(f"A/B ({args.a} vs {args.b}): detected in {power * 100:.1f} % of trials (target >= 95 %); "
          f"median ratio B/A {sorted(v.ratio for v in ab)[len(ab) // 2]:.3f} [{time.time() - t0:.0f} s]")
    print(f"example verdicts: A/A: {aa[0].summary()} | A/B: {ab[0].summary()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
