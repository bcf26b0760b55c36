"""Layers pane: the model's complexity summary and the per-layer table (params, FLOPs, shapes)."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import DataTable, Static

from torchperf_tui.formatting import fit_name, format_bytes, format_count


def shape_text(shape) -> str:
    if shape is None:
        return "–"
    if isinstance(shape, (list, tuple)) and shape and isinstance(shape[0], (list, tuple)):
        return ", ".join(shape_text(s) for s in shape)
    if isinstance(shape, (list, tuple)):
        return "x".join(str(d) for d in shape)
    return str(shape)


def complexity_summary(cx) -> str:
    """One line: parameters, size, FLOPs and MACs of a Complexity (of a training step: its backward too)."""
    backward = getattr(cx, "backward_flops", None)
    step = (f" + backward {format_count(backward, 'FLOPs')} (training step {cx.step_flops / cx.flops:.2f}x)"
            if backward is not None and cx.flops else "")
    return (f"{format_count(cx.params_total)} params · {format_bytes(cx.size_bytes)} · "
            f"{format_count(cx.flops, 'FLOPs')} ({format_count(cx.macs, 'MACs')}){step} · "
            f"input {shape_text(cx.input_shape)} {cx.dtype}")


# (key, label): what says where the time is likely to go first, so it is in sight at 80 columns beside the
# sidebar (the tab has ~45 there); the type and shapes after.
COLUMNS = (("name", "layer"), ("flops", "FLOPs"), ("share", "% FLOPs"), ("params", "params"), ("type", "type"),
           ("out", "output"), ("bytes", "out bytes"), ("intensity", "FLOP/byte"), ("side", "bound"))
MIN_NAME = 10


def columns_for(cx) -> tuple:
    """The table's columns for a Complexity: a training step's has its backward FLOPs beside the forward's."""
    if getattr(cx, "backward_flops", None) is None:
        return COLUMNS
    return COLUMNS[:3] + (("bwd", "bwd FLOPs"),) + COLUMNS[3:]


class LayersPane(Vertical):
    """Filled when a model has been analysed. The table is rebuilt for each model (no column keeps the width
    of an earlier model's names) and when the pane is resized (the name column fits the numbers beside it)."""

    DEFAULT_CSS = "LayersPane { height: 1fr; } LayersPane > DataTable { height: 1fr; }"

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self._shown: tuple | None = None  # (spec, complexity) on show
        self._roofline: list = []  # the latest run's per-layer roofline, for a rebuild
        self._row_of: dict[str, str] = {}
        self._fitted_to = 0  # the pane's width the table was last fitted to

    def compose(self) -> ComposeResult:
        yield Static("pick a model to see its layers", id="layers-summary")
        yield DataTable(id="layers-table", cursor_type="row", zebra_stripes=True)

    def on_mount(self) -> None:
        if not self.query(DataTable):
            return  # the app is closing as the pane mounts: its children are already gone
        self._columns(self.query_one(DataTable))

    @staticmethod
    def _columns(table: DataTable, columns: tuple = COLUMNS) -> None:
        table.clear(columns=True)
        for key, label in columns:
            table.add_column(label, key=key)

    def on_resize(self, event) -> None:
        if self._shown is not None and event.size.width != self._fitted_to:
            self.show_complexity(*self._shown)

    def show_complexity(self, spec: str, cx) -> None:
        if self._shown is None or self._shown[1] is not cx:
            self._roofline = []  # another model or input: the last run's roofline is not this one's
        self._shown = (spec, cx)
        self.query_one("#layers-summary", Static).update(
            f"[b]{spec}[/] · {complexity_summary(cx)} · {len(cx.layers)} layers")
        table = self.query_one(DataTable)
        cursor = table.cursor_row
        self._row_of = {}
        total = cx.flops or 0
        columns = columns_for(cx)
        training = columns is not COLUMNS
        rows = []
        for i, layer in enumerate(cx.layers):
            self._row_of.setdefault(layer.name, f"{i}")
            share = f"{100.0 * layer.flops / total:.1f}" if total and isinstance(layer.flops, (int, float)) else "–"
            backward = [format_count(layer.backward_flops or 0)] if training else []
            rows.append([layer.name or "(model)", format_count(layer.flops), share, *backward,
                         format_count(layer.params), layer.type, shape_text(layer.output_shape),
                         format_bytes(layer.output_bytes), "–", "–"])
        # The name gets what the numbers beside it leave of the width (each: its widest cell + 2): FLOPs, their
        # share (a training step's backward FLOPs) and params.
        beside = sum(max([len(label)] + [len(row[i]) for row in rows]) + 2
                     for i, (_, label) in enumerate(columns) if 1 <= i <= (4 if training else 3))
        self._fitted_to = self.size.width
        scrollbar = 2 if len(rows) + 1 > table.size.height else 0
        width = max(MIN_NAME, self.size.width - scrollbar - beside - 2)  # 2: its own cell padding
        self._columns(table, columns)
        for i, row in enumerate(rows):
            row[0] = fit_name(row[0], width)
            table.add_row(*row, key=f"{i}")
        if self._roofline:
            self.show_roofline(self._roofline)
        if 0 < cursor < table.row_count:
            table.move_cursor(row=cursor)

    def show_roofline(self, layers) -> None:
        """Per layer, from a finished run's roofline: arithmetic intensity and the side of the roofline
        (the run's device peaks; "–" where the data does not allow it)."""
        self._roofline = list(layers)
        table = self.query_one(DataTable)
        for layer in layers:
            key = self._row_of.get(layer.name)
            if key is None:
                continue
            intensity = layer.intensity
            table.update_cell(key, "intensity", f"{intensity:.1f}" if isinstance(intensity, (int, float)) else "–")
            table.update_cell(key, "side", layer.side if isinstance(layer.side, str) else "–")

    def show_error(self, spec: str, text: str) -> None:
        self._shown, self._roofline = None, []
        self.query_one("#layers-summary", Static).update(f"[b]{spec}[/]: [b $error]error:[/] {text}")
        self._columns(self.query_one(DataTable))
