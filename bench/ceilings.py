"""Measured ceilings' fidelity: the engine's matmul ceiling (torchperf-tui ceilings) against a bare torch.mm loop
of the same size in the same process, alternating rounds (target: within 5 %).

    .venv/bin/python bench/ceilings.py                   # CPU: fp32 2048x2048x2048
    .venv/bin/python bench/ceilings.py --device cuda     # the same for each GPU dtype at 8192
"""

from __future__ import annotations

import argparse
import platform
import statistics
import sys
import time

import torch

from torchperf_tui.engine.ceilings import CPU_MATMUL_N, GPU_DTYPES, GPU_MATMUL_N, measure_ceilings
from torchperf_tui.engine.inputs import resolve_device


def bare_mm(n: int, dtype_name: str, device: torch.device, reps: int) -> float:
    """FLOP/s of `reps` back-to-back torch.mm calls, timed as one block after two warm-ups."""
    dtype = torch.float32 if dtype_name in ("float32", "tf32") else getattr(torch, dtype_name)
    a, b = torch.randn(n, n, device=device, dtype=dtype), torch.randn(n, n, device=device, dtype=dtype)
    before = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = dtype_name == "tf32"
    try:
        for _ in range(2):
            torch.mm(a, b)
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        t0 = time.perf_counter()
        for _ in range(reps):
            torch.mm(a, b)
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        return 2 * n**3 * reps / (time.perf_counter() - t0)
    finally:
        torch.backends.cuda.matmul.allow_tf32 = before


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--reps", type=int, default=10)
    args = parser.parse_args()
    device = resolve_device(args.device)
    n = GPU_MATMUL_N if device.type == "cuda" else CPU_MATMUL_N
    dtypes = GPU_DTYPES if device.type == "cuda" else ("float32",)
    print(f"torch {torch.__version__} | {platform.machine()} | "
          f"{torch.cuda.get_device_name(device) if device.type == 'cuda' else 'cpu'} | threads {torch.get_num_threads()}")
    print(f"matmul {n}x{n}x{n}, {args.rounds} rounds alternating: the engine's ceiling (median of {args.reps} "
          f"timed repetitions: CUDA events on a GPU, perf_counter on the CPU) against a bare torch.mm loop "
          f"({args.reps} calls, one block)")
    engine: dict[str, list[float]] = {d: [] for d in dtypes}
    bare: dict[str, list[float]] = {d: [] for d in dtypes}
    for round_ in range(args.rounds):
        order = ("engine", "bare") if round_ % 2 == 0 else ("bare", "engine")
        for which in order:
            if which == "engine":
                result = measure_ceilings(str(device), reps=args.reps, copy_bytes=2**20)
                for d in dtypes:
                    engine[d].append(result.matmul(d).value)
            else:
                for d in dtypes:
                    bare[d].append(bare_mm(n, d, device, args.reps))
        print(f"round {round_ + 1}: " + "   ".join(f"{d} engine {engine[d][-1] / 1e12:.4g} / bare "
                                                   f"{bare[d][-1] / 1e12:.4g} TFLOP/s" for d in dtypes))
    for d in dtypes:
        ratio = statistics.median(engine[d]) / statistics.median(bare[d])
        verdict = "within" if abs(ratio - 1) <= 0.05 else "OUTSIDE"
        print(f"{d}: ratio of medians {ratio:.4f} ({(ratio - 1) * 100:+.2f} %): {verdict} the 5 % target")
    return 0


if __name__ == "__main__":
    sys.exit(main())
