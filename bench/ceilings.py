"""Measured ceilings' fidelity, and whether they are ceilings.

1. The engine's timing: its 2048x2048x2048 matmul (one of the workloads `torchperf-tui ceilings` tries) against
   a bare torch.mm loop of the same size in the same process, and its compute ceiling (the best workload)
   against a bare loop of that same workload; alternating rounds (target: each within 5 %).
2. The best of several workloads against the single matmul the ceiling used to be (ratio >= 1 by construction;
   how much higher says what one matmul missed).
3. A model beside it: resnet18's achieved FLOP/s (torchperf-tui's timing, batch 1 and 8) against the median
   ceiling: a ceiling is one no model beats (target: below 100 %).

    .venv/bin/python bench/ceilings.py                   # CPU: fp32
    .venv/bin/python bench/ceilings.py --device cuda     # the same for each GPU dtype (no model check)
"""

from __future__ import annotations

import argparse
import platform
import statistics
import sys
import time

import torch

from torchperf_tui.engine.measurements.ceiling_measurement import (CPU_CONVS, CPU_MATMUL_N, CPU_MATMUL_SIZES, GPU_CONVS,
                                                      GPU_DTYPES, GPU_MATMUL_N, GPU_MATMUL_SIZES, _settings,
                                                      _torch_dtype, compute_workloads, measure_ceilings)
from torchperf_tui.engine.hardware.device_choice import resolve_device


def bare_loop(workload, dtype_name: str, device: torch.device, reps: int, threads: int | None) -> float:
    """Rate of `reps` back-to-back calls of `workload`, timed as one block after two warm-ups, under the same
    flags as the engine's (TF32 for "tf32" only; the thread count it was measured at)."""
    with torch.inference_mode(), _settings(device, dtype_name, threads):
        fn = workload.build(device, _torch_dtype(dtype_name), None)
        for _ in range(2):
            fn()
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        t0 = time.perf_counter()
        for _ in range(reps):
            fn()
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        return workload.amount * reps / (time.perf_counter() - t0)


def model_rate(model: str, batch: int, device: str) -> float:
    """FLOP/s a model reaches forward, by the engine's timing and FLOP count."""
    from torchperf_tui.engine.workloads.complexity import analyse_complexity
    from torchperf_tui.engine.measurements.bench_config import BenchConfig
    from torchperf_tui.engine.measurements.timing import run_benchmark

    shape = (batch, 3, 224, 224)
    timing = run_benchmark(BenchConfig(model=model, input_shape=shape, device=device, warmup=3, iters=20))
    return analyse_complexity(model, shape).flops / (timing.stats.p50_ms / 1e3)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--reps", type=int, default=10)
    parser.add_argument("--model", default="resnet18", help="the model beside the ceiling (CPU); '' for none")
    args = parser.parse_args()
    device = resolve_device(args.device)
    cuda = device.type == "cuda"
    n = GPU_MATMUL_N if cuda else CPU_MATMUL_N
    workloads = {(w.name, w.size): w for w in compute_workloads(GPU_MATMUL_SIZES if cuda else CPU_MATMUL_SIZES, n,
                                                                 GPU_CONVS if cuda else CPU_CONVS)}
    square = ("matmul", f"{n}x{n}x{n}")
    dtypes = GPU_DTYPES if cuda else ("float32",)
    print(f"torch {torch.__version__} | {platform.machine()} | "
          f"{torch.cuda.get_device_name(device) if cuda else 'cpu'} | threads {torch.get_num_threads()}")
    print(f"{args.rounds} rounds alternating: the engine's ceilings (each workload's median of the repetitions its "
          f"time budget allows: CUDA events on a GPU, perf_counter on the CPU) against bare loops ({args.reps} "
          f"calls, one block) of matmul {n}^3 and of the workload that gave the ceiling")
    keys = ("square", "bare_square", "best", "bare_best")
    got: dict[str, dict[str, list[float]]] = {d: {k: [] for k in keys} for d in dtypes}
    winners: dict[str, list[str]] = {d: [] for d in dtypes}
    best_of: dict[str, tuple] = {}  # dtype: (the workload that gave this round's ceiling, its thread count)
    seconds = []
    for round_ in range(args.rounds):
        order = ("engine", "bare") if round_ % 2 == 0 else ("bare", "engine")
        for which in order:
            if which == "engine":
                result = measure_ceilings(str(device), copy_bytes=2**20)
                seconds.append(result.seconds)
                for d in dtypes:
                    ceiling = result.compute(d)
                    trial = next(t for t in ceiling.tried if (t.workload, t.size) == square and t.value)
                    got[d]["square"].append(trial.value)
                    got[d]["best"].append(ceiling.value)
                    winners[d].append(ceiling.origin)
                    best_of[d] = (workloads[(ceiling.workload, ceiling.size)], ceiling.threads)
            else:
                for d in dtypes:
                    got[d]["bare_square"].append(bare_loop(workloads[square], d, device, args.reps, None))
        for d in dtypes:  # the winner is known once the engine ran this round
            got[d]["bare_best"].append(bare_loop(*best_of[d][:1], d, device, args.reps, best_of[d][1]))
        print(f"round {round_ + 1} (ceilings measured in {seconds[-1]:.1f} s): " + "   ".join(
            f"{d} matmul {n}^3 engine {got[d]['square'][-1] / 1e12:.4g} / bare {got[d]['bare_square'][-1] / 1e12:.4g}"
            f"; ceiling {got[d]['best'][-1] / 1e12:.4g} ({winners[d][-1]}) / bare "
            f"{got[d]['bare_best'][-1] / 1e12:.4g} TFLOP/s" for d in dtypes))
    print(f"ceilings measured in {statistics.median(seconds):.1f} s (median of {len(seconds)})")
    for d in dtypes:
        med = {k: statistics.median(v) for k, v in got[d].items()}
        for what, a, b in (("matmul timing, engine/bare", "square", "bare_square"),
                           ("ceiling timing, engine/bare of the same workload", "best", "bare_best")):
            ratio = med[a] / med[b]
            verdict = "within" if abs(ratio - 1) <= 0.05 else "OUTSIDE"
            print(f"{d}: {what}: ratio of medians {ratio:.4f} ({(ratio - 1) * 100:+.2f} %): {verdict} the 5 % target")
        print(f"{d}: the ceiling (best of the workloads) / the single {n}^3 matmul it used to be: "
              f"{med['best'] / med['square']:.3f}; workloads that gave it: "
              + ", ".join(sorted(set(winners[d]), key=winners[d].count, reverse=True)))
    if args.model and not cuda:
        ceiling = statistics.median(got["float32"]["best"])
        for batch in (1, 8):
            rate = model_rate(args.model, batch, str(device))
            pct = 100 * rate / ceiling
            print(f"{args.model} batch {batch}: {rate / 1e12:.4g} TFLOP/s = {pct:.1f} % of the median ceiling: "
                  f"{'below' if pct < 100 else 'ABOVE'} it (against the single matmul: "
                  f"{100 * rate / statistics.median(got['float32']['square']):.1f} %)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
