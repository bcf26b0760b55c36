"""Timing fidelity: this engine's median latency against torch.utils.benchmark on the same model.

Both timers run in one process on the same model and input, alternating round by round, so drift and
neighbours hit both alike. Prints each round and the ratio of medians (target: within 3 %), and the ratio
of means: torch.utils.benchmark's "median" is the median of block means, so on a noisy box (right-skewed
latencies) it sits above a per-iteration median while the means agree.
On CUDA this engine synchronises every iteration (the latency of one request), while blocked_autorange
as it is lets the next iteration's launches overlap the current one's kernels (the pipelined steady state),
so the engine reads higher there by design: the like-for-like reference on CUDA is the same Timer with
`torch.cuda.synchronize()` after each call, and the pipelined median is printed beside it, with the gap.

    .venv/bin/python bench/timing_fidelity.py                 # resnet18, batch 1, CPU, 2 threads
    .venv/bin/python bench/timing_fidelity.py --device cuda   # the same on a GPU
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
from torchperf_tui.engine.workloads.models import build_model, default_input_shape
from torchperf_tui.engine.measurements.timing import run_timed_loop


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="resnet18")
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=6, help="alternating rounds of each timer")
    parser.add_argument("--iters", type=int, default=100, help="engine iterations per round")
    parser.add_argument("--min-run-time", type=float, default=2.0, help="blocked_autorange seconds per round")
    args = parser.parse_args()

    device = resolve_device(args.device)
    print(f"torch {torch.__version__} | python {platform.python_version()} | {platform.machine()} | "
          f"{torch.cuda.get_device_name(device) if device.type == 'cuda' else platform.processor() or 'cpu'}")
    print(f"model {args.model}, batch {args.batch}, device {device}, threads {args.threads}, "
          f"{args.rounds} rounds alternating (engine: {args.iters} iterations; "
          f"torch.utils.benchmark: blocked_autorange(min_run_time={args.min_run_time})"
          f"{', synchronised after every call like the engine' if device.type == 'cuda' else ''})")

    model = build_model(args.model).to(device)
    x = make_input(default_input_shape(args.model, batch=args.batch), device=device)
    pipelined_medians: list[float] = []
    with applied_flags(Flags(num_threads=args.threads)), torch.inference_mode():
        timer, pipelined = reference_timers("model(x)", {"model": model, "x": x}, device, args.threads)
        run_timed_loop(lambda: model(x), device=device, warmup=10, iters=10)  # shared warm-up, discarded

        def pipelined_round() -> None:
            if pipelined is not None:
                pipelined_medians.append(pipelined.blocked_autorange(min_run_time=args.min_run_time).median * 1e3)

        engine_medians, timer_medians, engine_means, timer_means = alternate_rounds(
            lambda: model(x), timer, device, args.rounds, args.iters, args.min_run_time, after_round=pipelined_round)

    report_agreement(engine_medians, timer_medians, engine_means, timer_means)
    report_pipelined(engine_medians, pipelined_medians)
    return 0


def alternate_rounds(engine_call, timer: tbench.Timer, device: torch.device, rounds: int, iters: int,
                     min_run_time: float, after_round=None) -> tuple[list[float], list[float], list[float], list[float]]:
    """`rounds` rounds of the engine's timed loop of `engine_call` and the reference `timer`, which of them goes
    first alternating so neither always follows the other; each round's line printed. -> (engine medians, timer
    medians, engine means, timer means) in ms."""
    engine_medians, timer_medians, engine_means, timer_means = [], [], [], []
    for round_ in range(rounds):
        for which in (("engine", "timer") if round_ % 2 == 0 else ("timer", "engine")):
            if which == "engine":
                times = run_timed_loop(engine_call, device=device, warmup=3, iters=iters)
                engine_medians.append(statistics.median(times.samples_ms))
                engine_means.append(statistics.fmean(times.samples_ms))
            else:
                m = timer.blocked_autorange(min_run_time=min_run_time)
                timer_medians.append(m.median * 1e3)
                timer_means.append(m.mean * 1e3)
        if after_round is not None:
            after_round()
        report_round(round_, engine_medians[-1], timer_medians[-1], width=8)
    return engine_medians, timer_medians, engine_means, timer_means


def reference_timers(stmt: str, names: dict, device: torch.device, threads: int
                     ) -> tuple[tbench.Timer, tbench.Timer | None]:
    """(the reference the engine must agree with, the pipelined timer or None). On CUDA the engine
    synchronises after every iteration, so its like-for-like reference does too; blocked_autorange's own
    way (one synchronisation per block: the next call's launches overlap this one's kernels) is timed beside
    it. On the CPU an iteration is synchronous and one timer serves."""
    threads = threads if device.type == "cpu" else 1
    if device.type != "cuda":
        return tbench.Timer(stmt=stmt, globals=names, num_threads=threads), None
    synced = tbench.Timer(stmt=f"{stmt}; torch.cuda.synchronize()", globals={**names, "torch": torch},
                          num_threads=threads)
    return synced, tbench.Timer(stmt=stmt, globals=names, num_threads=threads)


def report_pipelined(engine_medians: list[float], pipelined_medians: list[float]) -> None:
    """CUDA: how much a request's latency (the engine's, synchronised) exceeds the pipelined steady state."""
    if not pipelined_medians:
        return
    engine, pipelined = statistics.median(engine_medians), statistics.median(pipelined_medians)
    print(f"pipelined (torch.utils.benchmark, one synchronisation per block): median of rounds {pipelined:.3f} ms;"
          f" the engine's per-request latency is {engine - pipelined:+.3f} ms ({(engine / pipelined - 1) * 100:+.1f} %)"
          " above it: the GPU idles while each iteration's first kernels are launched and the CPU waits for its last")


def report_round(round_: int, engine_median: float, timer_median: float, width: int) -> None:
    """One round's line: the engine's median and torch.utils.benchmark's (`width` characters each) and their
    ratio."""
    print(f"round {round_ + 1}: engine p50 {engine_median:{width}.3f} ms   "
          f"torch.utils.benchmark median {timer_median:{width}.3f} ms   "
          f"ratio {engine_median / timer_median:.4f}")


def report_agreement(engine_medians: list[float], timer_medians: list[float], engine_means: list[float],
                     timer_means: list[float], target: float = 0.03) -> None:
    """The rounds' verdict: the ratio of the medians of rounds against the target (3 %), the median of the
    rounds' own ratios (paired, so drift between rounds cancels), and the ratio of means."""
    engine = statistics.median(engine_medians)
    reference = statistics.median(timer_medians)
    ratio = engine / reference
    verdict = "within" if abs(ratio - 1) <= target else "OUTSIDE"
    print(f"median of rounds: engine {engine:.3f} ms, torch.utils.benchmark {reference:.3f} ms")
    print(f"ratio of medians {ratio:.4f} ({(ratio - 1) * 100:+.2f} %): {verdict} the {target * 100:g} % target")
    paired = statistics.median(e / t for e, t in zip(engine_medians, timer_medians))
    print(f"median of the rounds' ratios {paired:.4f} ({(paired - 1) * 100:+.2f} %)")
    mean_ratio = statistics.median(engine_means) / statistics.median(timer_means)
    print(f"ratio of means   {mean_ratio:.4f} ({(mean_ratio - 1) * 100:+.2f} %)")


if __name__ == "__main__":
    sys.exit(main())
