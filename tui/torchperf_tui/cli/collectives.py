"""`torchperf-tui collectives`: the sizes and collectives checked here (no torch), the job in a measurement process as
every command's (which starts the ranks, and stops them on Ctrl-C), the latest size on one line of a terminal as it
goes, then a table per collective with busbw as a bar (or --json). Not kept in the history: a record there holds one
model's timing."""

from __future__ import annotations

import sys

from rich.table import Table

from torchperf_tui.cli import common
from torchperf_tui.cli.render import ProgressLine, console, print_kv
from torchperf_tui.core.errors import PROG
from torchperf_tui.engine.measurements.collectives import CollectivesSpec, parse_ops, parse_sizes
from torchperf_tui.wording.collectives import (bar_legend, collectives_rows, collectives_title, op_heading,
                                               point_cells, point_columns, point_line, progress_line)


def collectives_command(args) -> int:
    spec = CollectivesSpec(world=args.world, device=args.device, ops=parse_ops(args.ops),
                           sizes=parse_sizes(args.sizes), iters=args.iters, warmup=args.warmup)
    line = ProgressLine(enabled=sys.stderr.isatty() and not args.json)

    def progress(what: str, data) -> None:
        if what == "collective_point":
            line.show(point_line(data))
        elif what == "collective_progress":
            line.show(progress_line(*data))
        elif what == "note":
            line.close()
            print(f"{PROG}: note: {data}", file=sys.stderr)

    try:
        result, _ = common.run_job("collectives", {"spec": spec}, f"running {', '.join(spec.ops)} across processes",
                                   on_progress=progress)
    finally:
        line.close()
    return common.output(args, result, render_collectives)


def render_collectives(result) -> None:
    """The heading and rows, then per collective its heading and a row per size."""
    print_kv(collectives_title(result), collectives_rows(result))
    for op in result.spec.ops:
        if op in result.skipped or not result.points_of(op):
            continue
        table = Table(box=None, header_style="bold")
        for column in point_columns(result):
            table.add_column(column, justify="left" if column == "busbw" else "right")
        for cells in point_cells(result, op):
            table.add_row(*cells)
        console.print()
        console.print(op_heading(op, result.spec.world), style="bold")
        console.print(table)
    if result.points:
        console.print()
        console.print(bar_legend(result))
