"""Layers pane: the model's complexity summary and the per-layer table (params, FLOPs, shapes); after a run,
its intensity and bound per layer, and on request (key l) each layer's time: the run's model timed again,
the table sorted by time, with what no layer owns and, on a GPU, how much of the pass the GPU sat idle."""

from __future__ import annotations

from textual import on
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.markup import escape
from textual.widgets import DataTable, Static

from torchperf_tui.app.pane_jobs import PaneJobs
from torchperf_tui.app.widgets.fitted_table import FittedTable
from torchperf_tui.app.messages import JobEvent
from torchperf_tui.core.formatting import fit_name, format_count, format_ms, is_number, number_text
from torchperf_tui.wording.complexity import (attention_text, complexity_summary, counts_backward, layer_figures,
                                              shape_text)
from torchperf_tui.wording.conditions import disturbed_text
from torchperf_tui.measure.protocol import JobFailed
from torchperf_tui.core.marks import disturbance_marks


# (key, label): what says where the time is likely to go first, so it is in sight at 80 columns beside the
# sidebar (the tab has ~45 there); the type and shapes after.
COLUMNS = (("name", "layer"), ("flops", "FLOPs"), ("share", "% FLOPs"), ("params", "params"), ("type", "type"),
           ("out", "output"), ("bytes", "out bytes"), ("intensity", "FLOP/byte"), ("side", "bound"))
MIN_NAME = 10


TIME_COLUMNS = (("time", "time"), ("pass", "% pass"), ("rate", "FLOP/s"))


def columns_for(cx, timed: bool = False) -> tuple:
    """The table's columns for a Complexity: a training step's has its backward FLOPs beside the forward's; a
    timed one each layer's time, share of the pass and achieved FLOP/s right after the name."""
    columns = COLUMNS if not counts_backward(cx) else \
        COLUMNS[:3] + (("bwd", "bwd FLOPs"),) + COLUMNS[3:]
    return columns[:1] + TIME_COLUMNS + columns[1:] if timed else columns


class _Sorted(str):
    """A cell's text that sorts by a number (a time sorts by its ms, not by its digits)."""

    def __new__(cls, text: str, value: float):
        cell = super().__new__(cls, text)
        cell.value = value
        return cell


def time_split_text(roofline, label: str) -> tuple[str, str]:
    """(two short lines over the table, the whole split for its tooltip): what the times are, the profiled pass
    beside the run's median, what no layer owns, on a GPU how much of the pass it sat idle, and the marks of the run
    and of the passes timed per layer (a busy host: their heads on the line, whole in the tooltip)."""
    times = roofline.layer_times
    kind = "GPU kernel time" if times.kind == "cuda" else "CPU wall time"
    outside = sum(roofline.time_outside.values())
    line = (f"run {label} · {kind} per layer, longest first · pass {format_ms(times.pass_ms)} timed per layer "
            f"(mean of {times.iters}), {format_ms(roofline.latency_ms)} run median"
            + (f" · {format_ms(outside)} outside the rows" if outside else ""))
    if times.gpu is not None:
        line += f" · {times.gpu.short()}"
    marks = disturbance_marks(roofline)
    if marks:
        line += f"\n{disturbed_text(marks, compact=True)}"
    rows = "\n".join(f"  {format_ms(ms)}  {row}" for row, ms in roofline.time_outside.items())
    tip = (f"{times.method}.\nThe pass timed per layer {format_ms(times.pass_ms)} (mean of {times.iters}); the run's median "
           f"{format_ms(roofline.latency_ms)}." + (f"\nOutside the rows:\n{rows}" if rows else "")
           + (f"\n{times.gpu.summary()}" if times.gpu is not None else "")
           + (f"\n{disturbed_text(marks)}" if marks else ""))
    return line, tip


class LayersPane(Vertical):
    """Filled when a model has been analysed. The table is rebuilt for each model (no column keeps the width
    of an earlier model's names) and when the pane is resized (the name column fits the numbers beside it)."""

    DEFAULT_CSS = "LayersPane { height: 1fr; } LayersPane > DataTable { height: 1fr; }"

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self._shown: tuple | None = None  # (model, complexity) on show
        self._roofline: list = []  # the latest run's per-layer roofline, for a rebuild
        self._row_of: dict[str, str] = {}
        self.jobs = PaneJobs(self)
        self._run = None  # (label, TimingResult): the latest run of the shown model, for `l`
        self._timed = None  # the RooflineResult with layer times of that run, while it is the shown model's

    def compose(self) -> ComposeResult:
        yield Static("pick a model to see its layers", id="layers-summary")
        times = Static("", id="layers-times")
        times.display = False  # until there is a run to time
        yield times
        yield FittedTable(COLUMNS, id="layers-table", cursor_type="row", zebra_stripes=True)

    @on(FittedTable.WidthChanged)
    def _refit(self) -> None:
        if self._shown is not None:
            self.show_complexity(*self._shown)

    def show_complexity(self, model: str, cx) -> None:
        if self._shown is None or self._shown[1] is not cx:
            # another model or input: the last run's roofline and times are not this one's
            self._roofline, self._timed, self._run = [], None, None
            self.jobs.cancel("layer_times")
            self._times_line("")
        self._shown = (model, cx)
        attention = attention_text(cx)
        self.query_one("#layers-summary", Static).update(
            f"[b]{model}[/] · {complexity_summary(cx)} · {len(cx.layers)} layers"
            + (f"\n{escape(attention)}" if attention else ""))
        table = self.query_one(DataTable)
        cursor = table.cursor_row
        self._row_of = {}
        total = cx.flops or 0
        timed = {layer.name: layer for layer in self._timed.layers} if self._timed is not None else None
        columns = columns_for(cx, timed=timed is not None)
        training = counts_backward(cx)
        rows = []
        for i, layer in enumerate(cx.layers):
            self._row_of.setdefault(layer.name, f"{i}")
            share = f"{100.0 * layer.flops / total:.1f}" if total and is_number(layer.flops) else "–"
            figures = layer_figures(layer, training)
            backward = [figures["bwd FLOPs"]] if training else []
            times = self._time_cells(timed.get(layer.name)) if timed is not None else []
            rows.append([layer.name or "(model)", *times, figures["FLOPs"], share, *backward, figures["params"],
                         layer.type, shape_text(layer.output_shape), figures["output bytes"], "–", "–"])
        if timed is not None:  # longest first
            order = sorted(range(len(rows)), key=lambda i: -rows[i][1].value)
            rows = [rows[i] for i in order]
            self._row_of = {cx.layers[i].name: f"{i}" for i in order}
        # The name gets what the numbers beside it leave of the width (each: its widest cell + 2): the times,
        # FLOPs, their share (a training step's backward FLOPs) and params.
        last = (4 if training else 3) + (len(TIME_COLUMNS) if timed is not None else 0)
        beside = table.natural_width(columns[1:last + 1], [row[1:last + 1] for row in rows])
        width = max(MIN_NAME, table.columns_width(len(rows), laid_out=self.scrollable_content_region.width)
                    - beside - 2)  # 2: its own cell padding
        keys = list(self._row_of.values()) if timed is not None else [f"{i}" for i in range(len(rows))]
        for row in rows:
            row[0] = fit_name(row[0], width)
        table.fill(columns, rows, keys=keys)
        if self._roofline:
            self.show_roofline(self._roofline)
        if 0 < cursor < table.row_count:
            table.move_cursor(row=cursor)

    @staticmethod
    def _time_cells(layer) -> list:
        """time, % pass, FLOP/s of a timed row ('–' where it has none), sorting by the time."""
        if layer is None or not is_number(layer.time_ms):
            return [_Sorted("–", -1.0), "–", "–"]
        rate = layer.achieved_tflops
        return [_Sorted(format_ms(layer.time_ms), layer.time_ms), f"{layer.pass_pct:.1f}",
                format_count(rate * 1e12) if is_number(rate) else "–"]

    def show_roofline(self, layers, run=None, label: str = "") -> None:
        """Per layer, from a finished run's roofline: arithmetic intensity and the side of the roofline
        (the run's device peaks; "–" where the data does not allow it). `run`: that run (a TimingResult),
        which `l` times per layer."""
        if run is not None:
            self._run = (label, run)
            self._times_line(f"l: the time of each layer of run {label} (its model timed again, layer by layer)")
            if self._timed is not None:  # a new run: the times were the previous run's
                self._timed = None
                if self._shown is not None:
                    self._roofline = list(layers)
                    self.show_complexity(*self._shown)
        self._roofline = list(layers)
        table = self.query_one(DataTable)
        for layer in layers:
            key = self._row_of.get(layer.name)
            if key is None:
                continue
            table.update_cell(key, "intensity", number_text(layer.intensity, ".1f", na="–"))
            table.update_cell(key, "side", layer.side if isinstance(layer.side, str) else "–")

    # -- time per layer (key l) ----------------------------------------------------------------------------
    def time_layers(self) -> None:
        """Profile the last run's model again (its input, flags and step) and give each layer its time."""
        self.screen.show_tab("layers")
        if self._run is None:
            self.app.notify("time a run at a fixed input shape first (r): each layer's time is set beside that run's "
                            "median",
                            title="time per layer", severity="warning", timeout=6)
            return
        label, run = self._run
        self._times_line(f"run {label}: timing each layer of {escape(run.model)}…")
        self.jobs.start("layer_times", {"result": run, "report": self.app.session.report},
                        f"timing each layer of {run.model}")

    def _times_line(self, text: str, tooltip: str | None = None) -> None:
        if self.query("#layers-times"):
            widget = self.query_one("#layers-times", Static)
            widget.update(text)
            widget.tooltip = tooltip
            widget.display = bool(text)

    @on(JobEvent)
    def _job_event(self, message: JobEvent) -> None:
        event = self.jobs.accept(message)
        if event is None or self._run is None:
            return
        label = self._run[0]
        if isinstance(event, JobFailed):
            self._times_line("" if event.cancelled else f"run {label} per layer: [b $error]error:[/] {escape(event.error)}")
            if not event.cancelled:
                # short: the pane's line above the table says it whole
                self.app.notify(event.error, title="time per layer failed", severity="error", timeout=4)
            return
        if event.result is None:  # cancelled before a pass
            self._times_line("")
            return
        self._timed = event.result
        line, tip = time_split_text(event.result, label)
        self._times_line(escape(line), tip)
        if self._shown is not None:
            self.show_complexity(*self._shown)

    def show_error(self, model: str, text: str) -> None:
        self._timed, self._run = None, None
        self._times_line("")
        self._shown, self._roofline = None, []
        self.query_one("#layers-summary", Static).update(f"[b]{model}[/]: [b $error]error:[/] {text}")
        self.query_one(FittedTable).fill(COLUMNS, [])
