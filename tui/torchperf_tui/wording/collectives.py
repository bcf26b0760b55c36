"""Collectives across processes (engine.measurements.collectives.CollectivesResult) in words: the heading, the rows
(the ranks, the link's peak, what algbw and busbw are), a table per collective with a bar per size, and the line per
size as the run goes. busbw's definition is said here once."""

from __future__ import annotations

from torchperf_tui.core.formatting import format_bytes, format_ms, gbs_number, gbs_text
from torchperf_tui.engine.measurements.collectives import bus_factor
from torchperf_tui.wording import WARNING, Row, row

# What each collective's busbw factor is, in nccl-tests' words (its doc/PERFORMANCE.md).
FACTOR_WORDS = {"all_reduce": "2(n-1)/n", "all_gather": "(n-1)/n", "reduce_scatter": "(n-1)/n"}
ALGBW_WORDS = "algbw = S / time: S the message (all_gather's output, reduce_scatter's input, as nccl-tests sizes them)"
BUSBW_WORDS = ("busbw = algbw x " + ", x ".join(f"{factor} for {' and '.join(ops)}" for factor, ops in {
    factor: [op for op, f in FACTOR_WORDS.items() if f == factor] for factor in FACTOR_WORDS.values()}.items())
    + " (nccl-tests' bus bandwidth: what each rank's link carried, comparable with its peak whatever the number of "
      "ranks)")
TIME_WORDS = ("each iteration timed between barriers; a size's time is the largest of the ranks' medians (a "
              "collective ends with its slowest rank)")
BAR_WIDTH = 20
BAR_EIGHTHS = " ▏▎▍▌▋▊▉"


def device_words(spec) -> str:
    """'the CPU (gloo)' or 'GPUs (NCCL)'."""
    return "the CPU (gloo)" if spec.device == "cpu" else "GPUs (NCCL)"


def sizes_text(spec) -> str:
    """'1.0 KiB-64.0 MiB' (x4 a step), or one size."""
    lo, hi = spec.sizes
    return format_bytes(lo) if lo == hi else f"{format_bytes(lo)}-{format_bytes(hi)} (x4 a step)"


def collectives_title(result) -> str:
    """'all_reduce, all_gather, reduce_scatter across 2 ranks on the CPU (gloo), float32, 1.0 KiB-64.0 MiB'."""
    spec = result.spec
    return (f"{', '.join(spec.ops)} across {spec.world} ranks on {device_words(spec)}, {result.dtype}, "
            f"{sizes_text(spec)}")


def peak_text(result) -> str:
    """'450.0 GB/s each way per GPU (NVLink ...)', or 'n/a: the reason'."""
    if isinstance(result.peak_gbs, float):
        return f"{gbs_text(result.peak_gbs)} each way per GPU" + (f" ({result.peak_source})" if result.peak_source
                                                                  else "")
    return f"n/a: {getattr(result.peak_gbs, 'reason', result.peak_gbs)}"


def collectives_rows(result) -> list[Row]:
    """The ranks and what they ran on, the iterations, the link's peak, the definitions, what was not run, the
    notes and the time taken."""
    spec = result.spec
    devices = sorted(set(result.devices))
    rows = [row("ranks", f"{spec.world}, one process each (torch.multiprocessing), on "
                         + (", ".join(result.devices) if len(devices) > 1 else devices[0])),
            row("iterations", f"{spec.iters} timed per size, after {spec.warmup} warm-up"),
            row("time", TIME_WORDS), row("algbw", ALGBW_WORDS), row("busbw", BUSBW_WORDS),
            row("link's peak", peak_text(result))]
    rows += [row(f"no {op}", why, WARNING) for op, why in result.skipped.items()]
    rows += [row("note", note) for note in result.notes]
    if result.cancelled:
        rows.append(row("stopped", "cancelled: the sizes timed before the cancel", WARNING))
    rows.append(row("took", f"{result.seconds:.1f} s (torch {result.torch_version})"))
    return rows


def op_heading(op: str, world: int) -> str:
    """'all_reduce: busbw = algbw x 2(n-1)/n = algbw x 1.00 across 2 ranks'."""
    return f"{op}: busbw = algbw x {FACTOR_WORDS[op]} = algbw x {bus_factor(op, world):.2f} across {world} ranks"


def point_columns(result) -> list[str]:
    """The table's columns: % of the link's peak only where there is one."""
    peak = ["% of peak"] if isinstance(result.peak_gbs, float) else []
    return ["size", "time", "algbw GB/s", "busbw GB/s", *peak, "busbw"]


def bar(value: float, top: float, width: int = BAR_WIDTH) -> str:
    """A horizontal bar `width` cells long at `top`, in eighths of a cell."""
    if top <= 0 or value <= 0:
        return ""
    eighths = round(min(value, top) / top * width * 8)
    return "█" * (eighths // 8) + (BAR_EIGHTHS[eighths % 8] if eighths % 8 else "")


def bar_top(result) -> float:
    """What a full bar is: the link's peak where there is one, else the largest busbw of the run (the bars of every
    collective on one scale)."""
    if isinstance(result.peak_gbs, float):
        return result.peak_gbs
    return max((p.busbw_gbs for p in result.points), default=0.0)


def point_cells(result, op: str) -> list[list[str]]:
    """A row per size of `op`: size, time, algbw, busbw, % of the peak where there is one, and busbw as a bar."""
    top = bar_top(result)
    cells = []
    for p in result.points_of(op):
        peak = [f"{p.peak_pct:.1f}"] if isinstance(result.peak_gbs, float) else []
        cells.append([format_bytes(p.size_bytes), format_ms(p.time_s * 1e3), gbs_number(p.algbw_gbs),
                      gbs_number(p.busbw_gbs), *peak, bar(p.busbw_gbs, top)])
    return cells


def bar_legend(result) -> str:
    """What the bars are scaled to."""
    if isinstance(result.peak_gbs, float):
        return f"bars: busbw against the link's peak, {gbs_text(result.peak_gbs)}"
    return f"bars: busbw against the largest of the run, {gbs_text(bar_top(result))}"


def point_line(point) -> str:
    """The CLI's line per size as the run goes: 'all_reduce   64.0 MiB: 12.3 ms, algbw 5.46 GB/s, busbw 5.46 GB/s'."""
    return (f"{point.op:<14} {format_bytes(point.size_bytes):>10}: {format_ms(point.time_s * 1e3)}, "
            f"algbw {gbs_text(point.algbw_gbs)}, busbw {gbs_text(point.busbw_gbs)}")


def progress_line(op: str, size: int, done: int, total: int) -> str:
    """'all_reduce 64.0 MiB: 12/20 iterations'."""
    return f"{op} {format_bytes(size)}: {done}/{total} iterations"
