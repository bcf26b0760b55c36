"""`torchperf-tui sweep`: the arguments checked here (no torch: the lengths, the arms), the job in a measurement
process as every command's, the latest length on one line of a terminal as it goes, then the table (or --json). Not kept in the
history: a record there holds one timing, and a sweep is many lengths (its --json keeps them all)."""

from __future__ import annotations

import sys

from rich.table import Table

from torchperf_tui.core.errors import PROG, TorchperfError
from torchperf_tui.cli.mlflow import log_result, open_mlflow
from torchperf_tui.cli.render import console, print_kv, ProgressLine
from torchperf_tui.wording.sweep import point_line, sweep_cells, sweep_columns, sweep_rows, sweep_summary, sweep_title
from torchperf_tui.cli import common
from torchperf_tui.engine.measurements.ab_arms import parse_arm_spec, same_arms, same_arms_refusal
from torchperf_tui.engine.measurements.sweep import parse_seq_lens


def sweep_command(args) -> int:
    lo, hi = parse_seq_lens(args.seq_lens)  # '0-8', '512-128', 'x': one line, exit 2, before anything starts
    base = common.bench_config(args, warmup=args.warmup, seed=args.seed)
    arms = _sweep_arms(args, base)
    options = dict(iters=args.iters, warmup=args.warmup, time_budget_s=args.time_budget,
                   memory_cap_bytes=int(args.memory_cap * 1024**3) if args.memory_cap else None)

    # The latest length on one line of a terminal, taken away before the table, which holds every length: the
    # rows are said once (a line per length above the same rows read as the sweep printed twice).
    line = ProgressLine(enabled=sys.stderr.isatty() and not args.json)

    def progress(what: str, data) -> None:
        if what == "sweep_point":
            line.show(point_line(data))
        elif what == "note":
            line.close()
            print(f"{PROG}: note: {data}", file=sys.stderr)

    sink = open_mlflow(args)  # --mlflow: checked before anything runs
    what = f"sweeping the sequence length of {args.model}" + (" under A and B" if arms else "")

    def kept(partial) -> None:  # Ctrl-C: the lengths swept so far
        line.close()
        if partial.points:
            common.output(args, partial, render_sweep)

    try:
        result, extra = common.run_job("sweep", {"cfg": base, "seq_lens": (lo, hi), "arms": arms, "options": options}, what,
                                       on_progress=progress, kept=kept)
    finally:
        line.close()
    log_result(sink, "sweep", result, extra)
    return common.output(args, result, render_sweep)


def _sweep_arms(args, base):
    """None, or the two arms' SPECs parsed over the base run: both or neither, not the same, no shapes=."""
    if args.a is None and args.b is None:
        return None
    if args.a is None or args.b is None:
        raise TorchperfError("an A/B sweep takes both --a and --b (a sweep under the current flags takes neither)")
    arm_a, arm_b = parse_arm_spec(args.a, base=base.flags), parse_arm_spec(args.b, base=base.flags)
    if arm_a.shapes or arm_b.shapes:
        raise TorchperfError("a sweep sets the input's length itself: leave shapes= out of the SPECs")
    if same_arms(base, arm_a, arm_b):
        raise TorchperfError(same_arms_refusal("give the arms different flags, or sweep without --a and --b"))
    return arm_a, arm_b


def render_sweep(result) -> None:
    """The heading and rows (what ran, what stopped it, how memory was read), then a row per length."""
    print_kv(sweep_title(result), sweep_rows(result))
    table = Table(box=None, header_style="bold")
    for column in sweep_columns(result):
        table.add_column(column, justify="right")
    for cells in sweep_cells(result):
        table.add_row(*cells)
    console.print()
    console.print(table)
    console.print(sweep_summary(result))
