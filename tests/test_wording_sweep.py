"""A sweep in words (wording/sweep.py): its heading, an A/B's table with B/A, and an arm that stopped fitting."""

from torchperf_tui.engine.measurements.sweep import SweepPoint, SweepResult
from torchperf_tui.wording.sweep import point_line, sweep_cells, sweep_columns, sweep_summary, sweep_title


def ab_result() -> SweepResult:
    points = [SweepPoint(128, "A", True, 2.0, 2.5, 64_000.0, 2**20, iters=10),
              SweepPoint(128, "B", True, 1.0, 1.2, 128_000.0, 2**19, iters=10),
              SweepPoint(256, "A", False, reason="CUDA out of memory"),
              SweepPoint(256, "B", True, 2.0, 2.2, 128_000.0, 2**20, iters=10),
              SweepPoint(512, "B", True, 4.0, 4.4, 128_000.0, 2**21, iters=10)]
    return SweepResult(model="hf:llama", device="cuda:0", dtype="float16", batch=4, lengths=[128, 256, 512],
                       arms=[("A", "sdpa=math"), ("B", "sdpa=flash")], points=points,
                       stop_reason="every length asked was measured", memory_kind="cuda-allocator",
                       memory_cap_bytes=None, time_budget_s=120.0, duration_s=9.0, model_args="hidden_size=256")


def test_an_ab_table_puts_the_arms_side_by_side_with_their_ratio():
    result = ab_result()
    assert sweep_columns(result)[:4] == ["length", "A p50", "B p50", "B/A"]
    cells = sweep_cells(result)
    assert cells[0][:4] == ["128", "2.00 ms", "1.00 ms", "0.50x"]
    assert cells[1][:4] == ["256", "does not fit", "2.00 ms", ""]  # A ran out of memory: no ratio
    assert cells[2][:4] == ["512", "–", "4.00 ms", ""]  # A was not run past its failure
    assert cells[0][-2:] == ["1.0 MiB", "512.0 KiB"]


def test_the_heading_summary_and_progress_lines():
    result = ab_result()
    assert sweep_title(result) == ("hf:llama (hidden_size=256) on cuda:0, float16, batch 4, sequence lengths 128-512; "
                                   "random weights (nothing downloaded)")
    assert sweep_summary(result) == ("A: up to 128 tokens (2.00 ms p50, peak 1.0 MiB) · B: up to 512 tokens "
                                     "(4.00 ms p50, peak 2.0 MiB) · stopped: every length asked was measured")
    assert point_line(result.points[2]) == "length    256 A: does not fit: CUDA out of memory"
    assert point_line(result.points[1]) == "length    128 B: 1.00 ms p50, 1.20 ms p90, 128,000 tokens/s, peak 512.0 KiB"
