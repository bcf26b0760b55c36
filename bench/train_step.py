"""Training-step fidelity: the engine's `--step train` median against a hand-written training step timed by
torch.utils.benchmark, in one process.

The hand-written step is the textbook loop body: zero_grad(set_to_none=True), forward, cross-entropy against
fixed random labels, backward, SGD (momentum 0.9) step. The engine runs `run_benchmark` with step="train"
(its own model and its own StepRunner). Each round builds a fresh model for each timer and warms both up
alike, and the two alternate round by round so drift and neighbours hit both alike. Target: medians within
3 %. torch.utils.benchmark's "median" is the median of block means, so on a noisy box it sits above a
per-iteration median; the means are printed too. On CUDA the engine synchronises after every step, and so
does the reference (see timing_fidelity.reference_timers); the pipelined median (blocked_autorange as it is)
is printed beside it: on an H100 a resnet50 step at batch 32 read 5 % and 19 % below the engine's in two runs
(results/train_step_h100.txt).

    .venv/bin/python bench/train_step.py                       # resnet18, batch 4, 3x64x64, CPU, 2 threads
    .venv/bin/python bench/train_step.py --device cuda --batch 32 --input 3x224x224 --amp fp16
"""

from __future__ import annotations

import argparse
import platform
import sys

import torch
import torch.utils.benchmark as tbench

from torchperf_tui.engine.measurements.flags import Flags, applied_flags
from torchperf_tui.engine.workloads.inputs import make_input, parse_shape
from torchperf_tui.engine.hardware.device_choice import resolve_device
from torchperf_tui.core.formatting import format_shape
from torchperf_tui.engine.workloads.models import build_model
from torchperf_tui.engine.measurements.bench_config import BenchConfig
from torchperf_tui.engine.measurements.timing import run_benchmark
from timing_fidelity import (reference_timers, report_agreement, report_pipelined,  # bench/ is on the path
                             report_round)


def hand_written_step(name: str, shape: tuple[int, ...], device: torch.device, amp: str | None, seed: int):
    """The textbook training step on a freshly built model: zero_grad, forward, cross-entropy, backward, SGD."""
    torch.manual_seed(seed)
    model = build_model(name).to(device).train()
    x = make_input(shape, device=device)
    with torch.no_grad():
        classes = model(x).shape[1]
    labels = torch.randint(0, classes, (shape[0],), device=device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    scaler = torch.amp.GradScaler(device.type) if amp == "fp16" else None
    amp_dtype = {"fp16": torch.float16, "bf16": torch.bfloat16}.get(amp, torch.bfloat16)

    def step():
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast(device.type, dtype=amp_dtype, enabled=amp is not None):
            loss = torch.nn.functional.cross_entropy(model(x), labels)
        if scaler is not None:
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
        else:
            loss.backward()
            optimizer.step()
    return step


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="resnet18")
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--input", default="3x64x64", help="one sample's shape")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--amp", choices=["fp16", "bf16"], default=None)
    parser.add_argument("--rounds", type=int, default=8, help="alternating rounds of each timer")
    parser.add_argument("--iters", type=int, default=30, help="engine iterations per round")
    parser.add_argument("--min-run-time", type=float, default=2.0, help="blocked_autorange seconds per round")
    args = parser.parse_args()

    device = resolve_device(args.device)
    shape = (args.batch, *parse_shape(args.input))
    print(f"torch {torch.__version__} | python {platform.python_version()} | {platform.machine()} | "
          f"{torch.cuda.get_device_name(device) if device.type == 'cuda' else platform.processor() or 'cpu'}")
    print(f"model {args.model}, input {format_shape(shape)}, device {device}, threads {args.threads}, "
          f"amp {args.amp or 'off'}, training step (SGD momentum 0.9, cross-entropy), {args.rounds} rounds "
          f"alternating (engine: run_benchmark step=train, {args.iters} iterations; torch.utils.benchmark: "
          f"blocked_autorange(min_run_time={args.min_run_time}) of a hand-written step"
          f"{', synchronised after every step like the engine' if device.type == 'cuda' else ''})")

    flags = Flags(num_threads=args.threads) if device.type == "cpu" else Flags()
    cfg = BenchConfig(model=args.model, input_shape=shape, device=str(device), warmup=3, iters=args.iters,
                      flags=flags, step="train", optimizer="sgd", amp=args.amp)
    engine_medians, timer_medians, engine_means, timer_means, pipelined_medians = [], [], [], [], []
    with applied_flags(flags):
        for round_ in range(-1, args.rounds):  # round -1 warms the process (oneDNN primitives) and is dropped
            order = ("engine", "timer") if round_ % 2 == 0 else ("timer", "engine")
            for which in order:
                if which == "engine":
                    result = run_benchmark(cfg)
                    engine_medians.append(result.stats.p50_ms)
                    engine_means.append(result.stats.mean_ms)
                else:
                    # Like the engine's run: a model built for the round, the same warm-up, then the timer.
                    step = hand_written_step(args.model, shape, device, args.amp, seed=max(round_, 0))
                    for _ in range(cfg.warmup):
                        step()
                    timer, pipelined = reference_timers("step()", {"step": step}, device, args.threads)
                    m = timer.blocked_autorange(min_run_time=args.min_run_time)
                    timer_medians.append(m.median * 1e3)
                    timer_means.append(m.mean * 1e3)
                    if pipelined is not None:
                        pipelined_medians.append(pipelined.blocked_autorange(min_run_time=args.min_run_time).median
                                                 * 1e3)
                    del step, timer, pipelined
            if round_ < 0:
                for kept in (engine_medians, engine_means, timer_medians, timer_means, pipelined_medians):
                    kept.clear()
                continue
            report_round(round_, engine_medians[-1], timer_medians[-1], width=9)

    report_agreement(engine_medians, timer_medians, engine_means, timer_means)
    report_pipelined(engine_medians, pipelined_medians)
    return 0


if __name__ == "__main__":
    sys.exit(main())
