"""`why` on planted problems, with the fixes measured for real: each finding's estimate beside the gain its A/B
measured, and the factor between them (the issue's bar: within a factor of two).

The cases: a tiny llama forced to SDPA's math backend at sequence 1024 (attention runs math, fix --sdpa all); a
matmul-heavy MLP on one thread of the box's cores (the thread count); a model with one layer written slowly (named
with its share: no fix to measure); a well-set-up small CNN on the box's own thread count (no finding above 5 %).
Run on a quiet box (nothing else measuring), one process, the cases in turn:

    PYTHONPATH=tui:. .venv/bin/python bench/why_planted.py [--budget 120] > bench/results/why_planted.txt
"""

from __future__ import annotations

import argparse
import os
import platform

import torch

from torchperf_tui.engine.analysis.advisor import advise
from torchperf_tui.engine.hardware.device import probe_cpu
from torchperf_tui.engine.measurements.bench_config import BenchConfig
from torchperf_tui.engine.measurements.flags import Flags
from torchperf_tui.engine.workloads.model_args import parse_model_args
from torchperf_tui.wording.advice import estimate_text, measured_text

TINY_LLAMA = parse_model_args("num_hidden_layers=2,hidden_size=64,intermediate_size=128,num_attention_heads=4,"
                              "num_key_value_heads=4,vocab_size=256")


def cases(cores: int) -> list[tuple[str, BenchConfig, str | None]]:
    """(name, set-up, the finding expected first or None for none)."""
    return [
        ("attention forced to math", BenchConfig(model="hf:llama", model_args=TINY_LLAMA, seq_len=1024, device="cpu",
                                                 iters=20, warmup=3, flags=Flags(sdpa="math", num_threads=cores)),
         "attention_math"),
        ("one thread of several cores", BenchConfig(model="tests.tinymodels:wide_mlp", input_shape=(64, 512),
                                                    device="cpu", iters=64, warmup=10, flags=Flags(num_threads=1)),
         "threads"),
        ("a layer written slowly", BenchConfig(model="tests.tinymodels:slow_layer_net", input_shape=(8, 64),
                                               device="cpu", iters=64, warmup=10, flags=Flags(num_threads=cores)),
         "slow_layer"),
        ("a well-set-up small CNN", BenchConfig(model="tests.tinymodels:tiny_cnn", input_shape=(2, 3, 32, 32),
                                                device="cpu", iters=64, warmup=10, flags=Flags(num_threads=cores)),
         None),
    ]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--budget", type=float, default=120.0)
    args = parser.parse_args()
    cores = probe_cpu().physical_cores
    print(f"# why on planted problems: {platform.processor() or platform.machine()}, {os.cpu_count()} logical CPUs, "
          f"{cores} physical cores, torch {torch.__version__}, load {os.getloadavg()[0]:.1f} at the start")
    failures = 0
    for name, cfg, expected in cases(cores):
        result = advise(cfg, budget_s=args.budget)
        first = result.findings[0].key if result.findings else None
        ok = first == expected
        failures += not ok
        print(f"\n## {name}: pass {result.pass_ms:.3f} ms, {len(result.findings)} finding(s) listed, "
              f"{result.below} below {result.threshold_pct:g} %, {result.duration_s:.0f} s; first: {first} "
              f"({'as planted' if ok else f'expected {expected}'})")
        for finding in result.findings:
            print(f"- {finding.key}: {finding.what}")
            print(f"  estimate: {estimate_text(finding)}")
            print(f"  measured: {measured_text(finding)}")
            if finding.measured_ms:
                factor = finding.at_stake_ms / finding.measured_ms
                print(f"  estimate / measured: {factor:.2f} ({'within' if 0.5 <= factor <= 2 else 'outside'} a "
                      "factor of two)")
    print(f"\n{'all as planted' if not failures else f'{failures} case(s) not as planted'}; load "
          f"{os.getloadavg()[0]:.1f} at the end")


if __name__ == "__main__":
    main()
