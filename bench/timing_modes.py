"""Timing modes' fidelity: the engine's `pipelined` median (bench --modes) against torch.utils.benchmark's
blocked_autorange on the same model, in one process, for each model given; on CUDA the sync and graph
medians are printed beside it, with the gaps the engine names.

blocked_autorange times blocks of back-to-back calls with one synchronisation per block, which is what the
pipelined mode does, so the two should agree (target: medians within 3 %). Each round builds a fresh model
for each timer, so the rounds alternate and drift and neighbours hit both timers alike.

    .venv/bin/python bench/timing_modes.py                                   # CPU, 2 threads
    .venv/bin/python bench/timing_modes.py --device cuda --batch 1 --models resnet18 resnet50
"""

from __future__ import annotations

import argparse
import platform
import statistics
import sys

import torch
import torch.utils.benchmark as tbench

from torchperf_tui.engine.measurements.flags import Flags, applied_flags
from torchperf_tui.engine.workloads.inputs import make_input
from torchperf_tui.engine.hardware.device_choice import resolve_device
from torchperf_tui.core.formatting import format_shape
from torchperf_tui.engine.workloads.models import build_model, default_input_shape
from torchperf_tui.engine.measurements.bench_config import BenchConfig
from torchperf_tui.engine.measurements.timing_modes import run_modes
from timing_fidelity import report_agreement  # bench/ is on the path when a script here runs


def reference_median(name: str, shape: tuple[int, ...], device: torch.device, threads: int,
                     min_run_time: float) -> tuple[float, float]:
    """(median, mean) of blocked_autorange on a freshly built model: ms per call."""
    model = build_model(name).to(device).eval()
    x = make_input(shape, device=device)
    with torch.inference_mode():
        for _ in range(3):
            model(x)
        timer = tbench.Timer(stmt="model(x)", globals={"model": model, "x": x},
                             num_threads=threads if device.type == "cpu" else 1)
        m = timer.blocked_autorange(min_run_time=min_run_time)
    return m.median * 1e3, m.mean * 1e3


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=["resnet18", "mobilenet_v3_small"])
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--input", default=None, help="one sample's shape, e.g. 3x64x64 (default: the model's)")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--iters", type=int, default=60, help="engine iterations per mode per round")
    parser.add_argument("--per-block", type=int, default=10)
    parser.add_argument("--min-run-time", type=float, default=1.0, help="blocked_autorange seconds per round")
    args = parser.parse_args()

    device = resolve_device(args.device)
    modes = ("sync", "pipelined", "graph") if device.type == "cuda" else ("sync", "pipelined")
    print(f"torch {torch.__version__} | python {platform.python_version()} | {platform.machine()} | "
          f"{torch.cuda.get_device_name(device) if device.type == 'cuda' else platform.processor() or 'cpu'}")
    print(f"device {device}, threads {args.threads}, batch {args.batch}, {args.rounds} rounds alternating (engine: "
          f"bench --modes {','.join(modes)}, {args.iters} iterations, pipelined blocks of {args.per_block}; "
          f"torch.utils.benchmark: blocked_autorange(min_run_time={args.min_run_time}))")
    flags = Flags(num_threads=args.threads) if device.type == "cpu" else Flags()
    with applied_flags(flags):
        for name in args.models:
            if args.input:
                shape = (args.batch, *(int(d) for d in args.input.split("x")))
            else:
                shape = default_input_shape(name, batch=args.batch)
            cfg = BenchConfig(model=name, input_shape=shape, device=str(device), warmup=5, iters=args.iters,
                              flags=flags)
            print(f"\n{name}, input {format_shape(shape)}")
            engine, reference, engine_means, reference_means = [], [], [], []
            others: dict[str, list[float]] = {mode: [] for mode in modes if mode != "pipelined"}
            findings: list[str] = []
            for round_ in range(-1, args.rounds):  # round -1 warms the process up and is dropped
                order = ("engine", "timer") if round_ % 2 == 0 else ("timer", "engine")
                for which in order:
                    if which == "engine":
                        result = run_modes(cfg, modes, per_block=args.per_block, rounds=1)
                        engine.append(result.median("pipelined"))
                        engine_means.append(result.mode("pipelined").stats.mean_ms)
                        for mode in others:
                            others[mode].append(result.median(mode))
                        findings = result.findings
                    else:
                        median, mean = reference_median(name, shape, device, args.threads, args.min_run_time)
                        reference.append(median)
                        reference_means.append(mean)
                if round_ < 0:
                    for kept in (engine, reference, engine_means, reference_means, *others.values()):
                        kept.clear()
                    continue
                beside = "   ".join(f"{mode} {values[-1]:8.3f} ms" for mode, values in others.items()
                                   if values[-1] is not None)
                print(f"round {round_ + 1}: pipelined p50 {engine[-1]:8.3f} ms   torch.utils.benchmark median "
                      f"{reference[-1]:8.3f} ms   ratio {engine[-1] / reference[-1]:.4f}   {beside}")
            report_agreement(engine, reference, engine_means, reference_means)
            for mode, values in others.items():
                known = [v for v in values if v is not None]
                if known:
                    print(f"{mode}: median of rounds {statistics.median(known):.3f} ms")
            for line in findings:
                print(f"last round: {line}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
