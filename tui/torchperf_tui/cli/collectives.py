"""`torchperf-tui collectives`: the sizes and collectives checked here (no torch), the job in a measurement process as
every command's (which starts the ranks, and stops them on Ctrl-C), the latest size on one line of a terminal as it
goes, then a table per collective with busbw as a bar (or --json). Not kept in the history: a record there holds one
model's timing."""

from __future__ import annotations

import sys
from typing import Any, Callable

from rich.table import Table

from torchperf_tui.cli import common
from torchperf_tui.cli.render import ProgressLine, console, print_kv
from torchperf_tui.core.errors import PROG
from torchperf_tui.engine.measurements.collectives import CollectivesSpec, parse_ops, parse_sizes
from torchperf_tui.wording.collectives import (bar_legend, collectives_rows, collectives_title, op_heading,
                                               point_cells, point_columns, point_line, progress_line, running_text)


def run_across_ranks(args, kind: str, params: dict, what: str, shown: dict[str, Callable[[Any], str]],
                     render: Callable[[Any], None] | None = None):
    """A job whose ranks run across processes (collectives, ddp): its progress of the kinds in `shown` on one line
    of a terminal as it goes (in the words `shown` gives each), its notes on stderr; -> its result. `render`: how a
    result that Ctrl-C cut short is shown (what it timed so far) before the interrupt goes on up."""
    line = ProgressLine(enabled=sys.stderr.isatty() and not args.json)

    def kept(partial) -> None:
        line.close()
        if partial.points:  # a size was timed: cancelled before one, there is nothing to show
            common.output(args, partial, render)

    def progress(kind_of: str, data) -> None:
        if kind_of in shown:
            line.show(shown[kind_of](data))
        elif kind_of == "note":
            line.close()
            print(f"{PROG}: note: {data}", file=sys.stderr)

    try:
        result, _ = common.run_job(kind, params, what, on_progress=progress, kept=kept if render is not None else None)
    finally:
        line.close()
    return result


def collectives_command(args) -> int:
    spec = CollectivesSpec(world=args.world, device=args.device, ops=parse_ops(args.ops),
                           sizes=parse_sizes(args.sizes), iters=args.iters, warmup=args.warmup)
    shown = {"collective_point": point_line, "collective_progress": lambda data: progress_line(*data)}
    result = run_across_ranks(args, "collectives", {"spec": spec}, running_text(spec), shown, render_collectives)
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
