"""Time per layer against the measured pass: the per-layer rows of `roofline --layers` (each layer's own time,
and what no layer owns) summed, against the engine's synchronised median of the same model timed without
the profiler, in one process, for each model given.

The rows add up to the profiled pass by construction (CPU: wall time; GPU: kernel time plus the idle time), so
what this measures is what profiling the layers costs: the target is the rows within 10 % of the timed pass.
The table's rows alone (leaf modules and containers that compute something themselves) are printed too: the
gap to the pass is the blocks' own code (a residual add) and, in a training step, the loss and optimizer.
Rounds alternate which one runs first, so drift hits both alike.

    .venv/bin/python bench/layer_times.py                                  # CPU, 2 threads
    .venv/bin/python bench/layer_times.py --device cuda --batch 1 64 --models resnet18 resnet50
"""

from __future__ import annotations

import argparse
import platform
import statistics

import torch

from torchperf_tui.engine.measurements.flags import Flags, applied_flags
from torchperf_tui.engine.hardware.device_choice import resolve_device
from torchperf_tui.core.formatting import format_shape
from torchperf_tui.engine.workloads.models import default_input_shape
from torchperf_tui.engine.measurements.bench_config import BenchConfig
from torchperf_tui.engine.measurements.timing import run_benchmark
from torchperf_tui.measure.follow_up import layer_times_of_run


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=["resnet18", "mobilenet_v3_small"])
    parser.add_argument("--batch", nargs="+", type=int, default=[1])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--step", default="infer", choices=("infer", "train"))
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--iters", type=int, default=40, help="timed iterations per round")
    parser.add_argument("--layer-iters", type=int, default=5, help="profiled passes per round")
    args = parser.parse_args()

    device = resolve_device(args.device)
    flags = Flags(num_threads=args.threads) if device.type == "cpu" else Flags()
    print(f"torch {torch.__version__} | python {platform.python_version()} | {platform.machine()} | "
          f"{torch.cuda.get_device_name(device) if device.type == 'cuda' else platform.processor() or 'cpu'}")
    print(f"device {device}, threads {args.threads}, step {args.step}, {args.rounds} rounds alternating (timed: "
          f"{args.iters} synchronised iterations, median; per layer: {args.layer_iters} passes, mean)")
    worst = 0.0
    with applied_flags(flags):
        for name in args.models:
            for batch in args.batch:
                shape = default_input_shape(name, batch=batch)
                cfg = BenchConfig(model=name, input_shape=shape, device=str(device), warmup=5, iters=args.iters,
                                  flags=flags, step=args.step, time_budget_s=None)
                print(f"\n{name}, input {format_shape(shape)}")
                ratios, means = [], []
                result = None
                for round_ in range(args.rounds):
                    # layer_times_of_run profiles the run it is given again; the timed median set beside it is
                    # the one before it in even rounds and a fresh one after it in odd rounds.
                    timing = run_benchmark(cfg)
                    result = layer_times_of_run(timing, iters=args.layer_iters)
                    if round_ % 2 == 1:
                        timing = run_benchmark(cfg)
                    timed = timing.stats.p50_ms
                    rows = sum(l.time_ms for l in result.layers if isinstance(l.time_ms, float))
                    outside = sum(result.time_outside.values())
                    ratios.append((rows + outside) / timed)
                    means.append((rows + outside) / timing.stats.mean_ms)
                    print(f"round {round_ + 1}: timed median {timed:7.3f} ms, mean {timing.stats.mean_ms:7.3f} ms | "
                          f"per layer: rows {rows:7.3f} + outside {outside:6.3f} = {rows + outside:7.3f} ms (mean) | "
                          f"/ timed median {ratios[-1]:.3f}, / timed mean {means[-1]:.3f}")
                median = statistics.median(ratios)
                worst = max(worst, abs(median - 1.0))
                print(f"median ratio to the timed mean {statistics.median(means):.3f}")
                print(f"median ratio {median:.3f}: the rows are {'within' if abs(median - 1) <= 0.10 else 'NOT within'} "
                      f"10 % of the timed pass")
                top = sorted((l for l in result.layers if isinstance(l.time_ms, float)), key=lambda l: -l.time_ms)[:5]
                print("longest (last round): " + ", ".join(f"{l.name} {l.time_ms:.3f} ms ({l.pass_pct:.1f} %)"
                                                             for l in top))
                print("outside the rows: " + ", ".join(f"{row} {ms:.3f} ms" for row, ms in result.time_outside.items()))
                if result.layer_times.gpu is not None:
                    print(result.layer_times.gpu.summary())
    print(f"\nlargest distance of a median ratio from 1: {100 * worst:.1f} %")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
