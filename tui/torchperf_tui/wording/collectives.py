"""Collectives across processes (engine.measurements.collectives.CollectivesResult) in words: the heading, the rows
(the ranks, the link's peak, what algbw and busbw are), a table per collective with a bar per size (the CLI's) or one
table of every collective and size with busbw against message size as a plot (the Device tab's), and the line per size
as the run goes. busbw's definition is said here once."""

from __future__ import annotations

from torchperf_tui.core.formatting import format_bytes, format_ms, gbs_number, gbs_text
from torchperf_tui.engine.measurements.collectives import bus_factor
from torchperf_tui.engine.measurements.ranks import DEFAULT_CPU_WORLD
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


TITLE = "Collectives"  # the Device tab's section


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


def setup_rows(result) -> list[Row]:
    """The ranks and what they ran on, and the iterations."""
    spec = result.spec
    devices = sorted(set(result.devices))
    return [row("ranks", f"{spec.world}, one process each (torch.multiprocessing), on "
                         + (", ".join(result.devices) if len(devices) > 1 else devices[0])),
            row("iterations", f"{spec.iters} timed per size, after {spec.warmup} warm-up")]


def definition_rows() -> list[Row]:
    """What a size's time, algbw and busbw are."""
    return [row("time", TIME_WORDS), row("algbw", ALGBW_WORDS), row("busbw", BUSBW_WORDS)]


def outcome_rows(result) -> list[Row]:
    """The link's peak, what was not run, the notes, a cancel and the time taken."""
    rows = [row("link's peak", peak_text(result))]
    rows += [row(f"no {op}", why, WARNING) for op, why in result.skipped.items()]
    rows += [row("note", note) for note in result.notes]
    if result.cancelled:
        rows.append(row("stopped", "cancelled: the sizes timed before the cancel", WARNING))
    rows.append(row("took", f"{result.seconds:.1f} s (torch {result.torch_version})"))
    return rows


def collectives_rows(result) -> list[Row]:
    """The ranks and what they ran on, the iterations, the definitions, the link's peak, what was not run, the
    notes and the time taken."""
    return setup_rows(result) + definition_rows() + outcome_rows(result)


def op_heading(op: str, world: int) -> str:
    """'all_reduce: busbw = algbw x 2(n-1)/n = algbw x 1.00 across 2 ranks'."""
    return f"{op}: busbw = algbw x {FACTOR_WORDS[op]} = algbw x {bus_factor(op, world):.2f} across {world} ranks"


def point_columns(result) -> list[str]:
    """The table's columns: % of the link's peak only where there is one."""
    return [label for _, label in table_columns(isinstance(result.peak_gbs, float))[1:]] + ["busbw"]


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


def size_cell(size: int) -> str:
    """A message size in a table: '64.0 KiB'."""
    return format_bytes(size)


def figure_cells(point, peak: bool) -> list[str]:
    """A size's figures: size, time, algbw, busbw (GB/s) and, where there is a peak (`peak`), busbw's % of it."""
    share = [f"{point.peak_pct:.1f}" if point.peak_pct is not None else "n/a"] if peak else []
    return [size_cell(point.size_bytes), format_ms(point.time_s * 1e3), gbs_number(point.algbw_gbs),
            gbs_number(point.busbw_gbs), *share]


def point_cells(result, op: str) -> list[list[str]]:
    """A row per size of `op`: size, time, algbw, busbw, % of the peak where there is one, and busbw as a bar."""
    top = bar_top(result)
    peak = isinstance(result.peak_gbs, float)
    return [figure_cells(p, peak) + [bar(p.busbw_gbs, top)] for p in result.points_of(op)]


# The one table of every collective and size (the Device tab's), (key, label) each; the CLI's table per collective
# takes the same columns after the collective's, and a bar.
TABLE_COLUMNS = (("op", "op"), ("size", "size"), ("time", "time"), ("algbw", "algbw GB/s"), ("busbw", "busbw GB/s"))
PEAK_COLUMN = ("peak", "% of peak")


def table_columns(peak: bool) -> tuple[tuple[str, str], ...]:
    """The one table's columns: % of the link's peak only where there is one (`peak`)."""
    return TABLE_COLUMNS + ((PEAK_COLUMN,) if peak else ())


def table_cells(point, peak: bool) -> list[str]:
    """A row of the one table: the collective, then its size's figures (figure_cells)."""
    return [point.op, *figure_cells(point, peak)]


def elsewhere_text(labels: list[str], sidebar: bool = True) -> str:
    """Under a table too narrow for every column: 'time and algbw GB/s: h hides the sidebar' (`sidebar`: it is
    shown), or else a wider terminal."""
    return f"{' and '.join(labels)}: {'h hides the sidebar' if sidebar else 'a wider terminal shows them'}"


def bar_legend(result) -> str:
    """What the bars are scaled to."""
    if isinstance(result.peak_gbs, float):
        return f"bars: busbw against the link's peak, {gbs_text(result.peak_gbs)}"
    return f"bars: busbw against the largest of the run, {gbs_text(bar_top(result))}"


def point_line(point, aligned: bool = True) -> str:
    """The line per size as the run goes: 'all_reduce   64.0 MiB: 12.3 ms, algbw 5.46 GB/s, busbw 5.46 GB/s' (the
    CLI's, `aligned` in columns line after line), or with single spaces (the app's)."""
    op, size = (f"{point.op:<14}", f"{format_bytes(point.size_bytes):>10}") if aligned else (
        point.op, format_bytes(point.size_bytes))
    return (f"{op} {size}: {format_ms(point.time_s * 1e3)}, algbw {gbs_text(point.algbw_gbs)}, "
            f"busbw {gbs_text(point.busbw_gbs)}")


def progress_line(op: str, size: int, done: int, total: int) -> str:
    """'all_reduce 64.0 MiB: 12/20 iterations'."""
    return f"{op} {format_bytes(size)}: {done}/{total} iterations"


def running_text(spec) -> str:
    """What the job does, as it starts: 'running all_reduce, all_gather, reduce_scatter across processes'."""
    return f"running {', '.join(spec.ops)} across processes"


def running_lines(spec, latest: str = "", now: str = "") -> list[str]:
    """While it runs, in the app: what runs, the `latest` size timed on every rank (point_line) and the one timed
    `now` (progress_line)."""
    return ([f"{running_text(spec)}…"] + ([f"  latest: {latest}"] if latest else [])
            + ([f"  now: {now}"] if now else []))


def cancelled_text(timed: bool) -> str:
    """A run cancelled before its result (the sizes `timed` so far shown below, or none)."""
    return "cancelled: the sizes timed before it are below" if timed else "cancelled before a size was timed"


def done_text(result) -> str:
    """Where a finished run ran and how it ended, after the title of the app's section (its table names the
    collectives and sizes): 'across 2 ranks on the CPU (gloo), float32 · done in 6.1 s'."""
    ended = "cancelled after" if result.cancelled else "done in"
    return (f"across {result.spec.world} ranks on {device_words(result.spec)}, {result.dtype} · {ended} "
            f"{result.seconds:.1f} s")


def not_run_text(spec, key: str, on_cpu: str = "") -> str:
    """Before a run: what `key` runs, where, and how long it takes. `on_cpu`: why the ranks are processes on the CPU
    whatever GPUs the box has ('the device chosen', 'no CUDA device here'); empty: where they run is not known yet."""
    where = (f"across {DEFAULT_CPU_WORLD} processes on the CPU (gloo), {on_cpu}" if on_cpu else
             f"across the box's GPUs (NCCL) where it has two or more, else across {DEFAULT_CPU_WORLD} processes on "
             "the CPU (gloo)")
    return (f"none yet. Press {key} to time {', '.join(spec.ops)} at message sizes {sizes_text(spec)}, {where}: "
            "each size's time, algbw and busbw against the link's peak (seconds on the CPU)")


# The plot: busbw against the message size, a curve per collective, the link's peak across it.
PLOT_X = "message size"
PLOT_Y = "busbw, GB/s"
SIZE_UNITS = (("G", 1024**3), ("M", 1024**2), ("K", 1024))


def size_tick(size: int) -> str:
    """A message size under the plot, as --sizes writes it: '4K', '16M' (powers of 1024), '1020 B' off them."""
    for unit, scale in SIZE_UNITS:
        if size >= scale and size % scale == 0:
            return f"{size // scale}{unit}"
    return f"{size} B" if size < 1024 else format_bytes(size)


def peak_line_text(result) -> str:
    """What the plot's horizontal line is: "the link's peak, 450.0 GB/s each way per GPU", or why there is none."""
    if isinstance(result.peak_gbs, float):
        return f"the link's peak, {gbs_text(result.peak_gbs)} each way per GPU"
    return "no link's peak to draw: " + ("the ranks ran on the CPU" if result.spec.device == "cpu"
                                         else "n/a (the rows say why)")
