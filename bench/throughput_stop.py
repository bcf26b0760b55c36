"""When the throughput search stops, and whether it picks the right batch, on this machine.

For each model, the search at its default options (plateau rule on, 120 s time budget, max batch 1024),
timed from the call to the result: the rule that stopped it, the batch it picked and its measured samples/s,
against the best samples/s any try saw. For contrast, the old rule (`to_oom=True`: grow until out of memory
or the bound, then bisect) with no time budget, capped at --contrast-max-batch (default 256: uncapped, the
CPU search ran past 600 s on squeezenet1_1), and whether the default search missed a better batch that the
longer search found. Tries are short (1 warm-up, 3 iterations), so compare rates at the 10-20 % level.

    .venv/bin/python bench/throughput_stop.py [--models squeezenet1_1 resnet18] [--contrast-max-batch 256]
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time

import torch

from torchperf_tui.engine.measurements.throughput import ThroughputResult, find_max_batch
from torchperf_tui.engine.measurements.bench_config import BenchConfig
from torchperf_tui.core.formatting import format_shape


def load_line() -> tuple[str, bool]:
    """The load averages, and whether the box looks busy (1-minute load above a quarter of the cores)."""
    one, five, fifteen = os.getloadavg()
    busy = one > 0.25 * (os.cpu_count() or 1)
    return f"load average {one:.2f} {five:.2f} {fifteen:.2f}", busy


def best_seen(result: ThroughputResult) -> tuple[int, float]:
    """(batch, samples/s) of the fitting try with the most samples/s (each try: batch / median latency)."""
    best = max((t for t in result.tries if t.fits and t.samples_per_s is not None), key=lambda t: t.samples_per_s)
    return best.batch, best.samples_per_s


def describe(label: str, result: ThroughputResult, wall_s: float) -> None:
    batches = " ".join(f"{t.batch}{'' if t.fits else 'x'}" for t in result.tries)
    print(f"  {label}: {wall_s:.1f} s to the result; stopped by {result.stop_rule}: {result.stop_reason}")
    print(f"    tries (x: did not fit): {batches}")
    print(f"    picked batch {result.best_batch}: measured {result.samples_per_s:.1f} samples/s "
          f"(its try {result.best_try_samples_per_s:.1f}); largest batch that fits: {result.limit_text()}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=["squeezenet1_1", "resnet18"])
    parser.add_argument("--contrast-max-batch", type=int, default=256,
                        help="bound of the to_oom contrast run (0: skip it)")
    args = parser.parse_args()

    import torchvision.models  # noqa: F401 - a one-time import cost, not the search's

    load, busy = load_line()
    print(f"torch {torch.__version__} | python {platform.python_version()} | {platform.machine()} | "
          f"{os.cpu_count()} cores, {torch.get_num_threads()} torch threads | CPU, float32, default input shapes")
    print(f"at the start: {load}" + (" -- the box was NOT quiet: other processes were running, timings are "
                                     "noisier and slower than on a quiet box" if busy else " (quiet)"))
    for model in args.models:
        cfg = BenchConfig(model=model, device="cpu")
        print(f"\n{model} {format_shape(cfg.resolved_shape()[1:])} per sample")
        started = time.perf_counter()
        default = find_max_batch(cfg)
        default_s = time.perf_counter() - started
        describe("default", default, default_s)
        seen_batch, seen_rate = best_seen(default)
        if args.contrast_max_batch:
            started = time.perf_counter()
            old = find_max_batch(cfg, to_oom=True, time_budget_s=None, max_batch=args.contrast_max_batch)
            old_s = time.perf_counter() - started
            describe(f"to_oom up to {args.contrast_max_batch}, no budget", old, old_s)
            old_batch, old_rate = best_seen(old)
            if old_rate > seen_rate:
                seen_batch, seen_rate = old_batch, old_rate
            print(f"    the default search took {default_s / old_s:.2f}x the time of this capped one "
                  f"({default_s:.1f} s vs {old_s:.1f} s)")
        picked_try = default.best_try_samples_per_s
        print(f"  best samples/s any try saw: {seen_rate:.1f} at batch {seen_batch}; the default search picked "
              f"batch {default.best_batch} ({picked_try:.1f} in its try, {picked_try / seen_rate:.2f}x the best "
              f"seen; measured {default.samples_per_s:.1f})")
        if args.contrast_max_batch:
            # Within one run, so that drift between the two runs does not count as a wrong pick.
            same = [t.samples_per_s for t in old.tries if t.fits and t.batch == default.best_batch]
            if same:
                print(f"  within the to_oom run: batch {default.best_batch} gave {same[-1]:.1f}, its best try was "
                      f"batch {old_batch} at {old_rate:.1f}: picked / best {same[-1] / old_rate:.2f}")
    load, busy = load_line()
    print(f"\nat the end: {load}" + (" -- NOT quiet" if busy else " (quiet)"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
