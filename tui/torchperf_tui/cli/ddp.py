"""`torchperf-tui ddp`: the run described as every model command's (no torch), the job in a measurement process as
every command's (which starts the ranks, and stops them on Ctrl-C), the rounds on one line of a terminal as they go,
then the rows, a row per part and the communication exposed and hidden (or --json). Not kept in the history: a record
there holds one model's timing on one device."""

from __future__ import annotations

from rich.table import Table

from torchperf_tui.cli import common
from torchperf_tui.cli.collectives import run_across_ranks
from torchperf_tui.cli.render import console, print_kv
from torchperf_tui.engine.measurements.ddp import DdpSpec
from torchperf_tui.wording.ddp import (ddp_rows, ddp_title, outcome_rows, part_cells, part_columns, progress_line)


def ddp_command(args) -> int:
    run = common.bench_config(args, step="train", warmup=args.warmup, iters=args.iters, seed=args.seed)
    spec = DdpSpec(run=run, world=args.world, device=args.device, bucket_mb=args.bucket_mb)
    result = run_across_ranks(args, "ddp", {"spec": spec}, f"running DDP steps of {args.model} across processes",
                              {"ddp_progress": lambda data: progress_line(*data)})
    return common.output(args, result, render_ddp)


def render_ddp(result) -> None:
    """The heading and rows, a row per part timed, then the exposed and hidden communication."""
    print_kv(ddp_title(result), ddp_rows(result))
    cells = part_cells(result)
    if cells:
        table = Table(box=None, header_style="bold")
        for column in part_columns():
            table.add_column(column, justify="left" if column in ("part", "what it is") else "right")
        for row in cells:
            table.add_row(*row)
        console.print()
        console.print(table)
    console.print()
    print_kv("communication", outcome_rows(result))
