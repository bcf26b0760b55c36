"""The CLI's facts that no timing gives: the device (`info`), its measured ceilings (`ceilings`), the model
catalogue (`models`) and a model's size and FLOPs (`flops`). Text only: no measurement here."""

from __future__ import annotations

from rich.table import Table

from torchperf_tui.cli.render import console, print_kv, print_line
from torchperf_tui.core.formatting import format_shape
from torchperf_tui.wording.complexity import complexity_rows, complexity_title, counts_backward, layer_cells
from torchperf_tui.wording.ceilings import ceiling_cells, ceilings_title, tried_cells
from torchperf_tui.wording.device import cpu_rows, formula_lines, gpu_rows, gpu_title, software_rows
from torchperf_tui.wording.topology import (LINK_LEGEND, LINKS_TITLE, NUMBERING, P2P_LEGEND, P2P_TITLE,
                                            PEAKS_HEADING, gpu_link_lines, link_cells, link_header, p2p_cells,
                                            p2p_header, shown)


def render_device_report(report, kept: dict | None = None) -> None:
    """`info`; `kept`: the measured ceilings kept per device ("cpu", "cuda:0"), None where there are none."""
    kept = kept or {}
    print_kv("Software", software_rows(report))
    for gpu in report.gpus:
        console.print()
        print_kv(gpu_title(gpu), gpu_rows(gpu, kept.get(f"cuda:{gpu.index}")))
        for line in formula_lines(gpu):
            console.print(f"  {line}")
    if shown(getattr(report, "topology", None)):
        render_topology(report.topology)
    console.print()
    print_kv("CPU", cpu_rows(report.cpu, kept.get("cpu")))


def render_topology(topology) -> None:
    """`info` across two GPUs or more: how they are linked and whether they reach each other's memory, as
    `nvidia-smi topo -m` lays it out, with each GPU's link peaks."""
    for title, header, rows, legend in ((LINKS_TITLE, link_header(topology), link_cells(topology), LINK_LEGEND),
                                        (P2P_TITLE, p2p_header(topology), p2p_cells(topology), P2P_LEGEND)):
        console.print()
        console.print(title, style="bold underline")
        table = Table(box=None, header_style="bold", pad_edge=False)
        for column in header:
            table.add_column(column)
        for cells in rows:
            table.add_row(*cells)
        console.print(table)
        print_line(legend)
    console.print()
    for line in [PEAKS_HEADING, *gpu_link_lines(topology), NUMBERING, *(f"n/a: {note}" for note in topology.notes)]:
        print_line(line)


SOURCE_ORDER = ("torchvision", "timm", "hf", "custom")


def render_catalogue(entries) -> None:
    """`models [--source S] [--task T]`: the entries grouped by source, then task (a transformers type's task is its
    head, causal-lm or base), with each one's default input; a source column only when more than torchvision shows."""
    sources = {getattr(e, "source", "torchvision") for e in entries}
    with_source = sources != {"torchvision"} and bool(entries)
    table = Table(title=f"{len(entries)} models (random weights: nothing is downloaded)", title_justify="left")
    if with_source:
        table.add_column("source")
    table.add_column("head" if sources == {"hf"} else "task")
    table.add_column("model")
    table.add_column("input (no batch)")
    table.add_column("note")

    def group(e):
        source = getattr(e, "source", "torchvision")
        return SOURCE_ORDER.index(source) if source in SOURCE_ORDER else len(SOURCE_ORDER), source, e.task

    previous = None
    for entry in sorted(entries, key=lambda e: (group(e), e.name)):
        key = group(entry)
        first_of_source = previous is None or previous[1] != key[1]
        first_of_task = previous != key
        previous = key
        shape = format_shape(entry.input_shape) if entry.input_shape else "its config's"
        cells = [entry.task if first_of_task else "", entry.name, shape,
                 "" if entry.supported else f"not supported: {entry.reason}"]
        table.add_row(*([key[1] if first_of_source else ""] if with_source else []), *cells)
    console.print(table)
    if "hf" in sources:
        console.print("hf: a token model takes --seq-len tokens (128 by default, or its maximum); --model-args sets "
                      "its config (e.g. num_hidden_layers=2)", markup=False)


def render_complexity(result, layers: bool = False) -> None:
    print_kv(complexity_title(result), complexity_rows(result))
    if not layers:
        return
    training = counts_backward(result)
    table = Table(box=None, header_style="bold")
    numeric = ("params", "FLOPs", "bwd FLOPs")
    for column in ("layer", "type", "input", "output", "params", "FLOPs", *(("bwd FLOPs",) if training else ()),
                   "output"):
        table.add_column(column, justify="right" if column in numeric else "left", no_wrap=True)
    for cells in layer_cells(result):
        table.add_row(*cells)
    console.print()
    console.print("per layer", style="bold underline")
    console.print(table)


def render_ceilings(result) -> None:
    """`ceilings`: each measured ceiling with the workload that gave it (a GPU's host-device transfers among them, or
    why there are none), every workload tried, where they are kept."""
    table = Table(box=None, header_style="bold")
    for column in ("ceiling", "dtype", "best of", "size", "threads", "median", "reached"):
        table.add_column(column, justify="right" if column in ("threads", "median", "reached") else "left")
    for cells in ceiling_cells(result):
        table.add_row(*cells)
    console.print(ceilings_title(result), style="bold underline")
    console.print(table)
    if result.outdated:
        console.print(f"these were {result.outdated}", markup=False)
    if result.no_transfers:  # a CPU has none, or a GPU's were kept before they were measured: said once
        console.print(result.no_transfers, markup=False)
    tried = tried_cells(result)
    if tried:
        console.print()
        console.print("workloads tried (the best of each dtype is its ceiling)", style="bold underline")
        rows = Table(box=None, header_style="bold")
        for column in ("dtype", "workload", "size", "threads", "reps", "reached"):
            rows.add_column(column, justify="right" if column in ("threads", "reps") else "left")
        for cells in tried:
            rows.add_row(*cells)
        console.print(rows)
    if result.path:
        console.print(f"kept in {result.path}; roofline and MFU are given against them too")
