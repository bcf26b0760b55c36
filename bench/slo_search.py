"""throughput --slo on this box: resnet18 with p99 within 20 ms, at its own input (224) and at 112 x 112, each batch
timed with the 555 passes p99 needs. Says, for each, the batch chosen with its measured p99, and the larger batches
tried that were not within the budget (the issue's check: a batch whose measured p99 is within 20 ms, and a larger one
tried that was not). Run on a quiet box:

    PYTHONPATH=tui .venv/bin/python bench/slo_search.py > bench/results/slo_search.txt
"""

from __future__ import annotations

import os
import platform
import sys

from torchperf_tui.core.formatting import format_ms, format_shape
from torchperf_tui.core.slo import parse_slo
from torchperf_tui.engine.measurements.bench_config import BenchConfig
from torchperf_tui.engine.measurements.throughput import find_slo_batch
from torchperf_tui.wording.throughput import slo_chosen_text, slo_point_line


def main() -> int:
    import torch

    slo = parse_slo("p99=20ms")
    print(f"# throughput --slo {slo.name}={slo.budget_ms:g}ms: {platform.machine()}, {os.cpu_count()} logical CPUs, "
          f"torch {torch.__version__}, load {os.getloadavg()[0]:.1f} at the start")
    ok = True
    for shape in ((1, 3, 224, 224), (1, 3, 112, 112)):
        result = find_slo_batch(BenchConfig(model="resnet18", input_shape=shape, device="cpu"), slo,
                                time_budget_s=240.0)
        print(f"\n## resnet18 at {format_shape(shape[1:])}: {result.duration_s:.0f} s")
        for point in result.points:
            print(f"- {slo_point_line(point, slo)}")
        print(f"chosen: {slo_chosen_text(result)}")
        print(f"stopped: {result.stop_reason}")
        chosen = result.chosen
        larger_missed = [p for p in result.points if chosen is not None and p.batch > chosen.batch
                         and p.verdict != "meets"]
        if chosen is not None:
            within = chosen.quantile.value_ms <= slo.budget_ms
            print(f"check: batch {chosen.batch}'s measured p99 {format_ms(chosen.quantile.value_ms)} within the budget: "
                  f"{within}; a larger batch tried and not within it: "
                  f"{', '.join(str(p.batch) for p in larger_missed) or 'none'}")
            ok = ok and within and bool(larger_missed)
        for mark in result.disturbance_marks():
            print(f"disturbed: {mark}")
    print(f"\nload {os.getloadavg()[0]:.1f} at the end")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
