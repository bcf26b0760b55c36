"""Layers pane: the model's complexity summary and the per-layer table (params, FLOPs, shapes)."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import DataTable, Static

from torchperf_tui.formatting import format_bytes, format_count


def shape_text(shape) -> str:
    if shape is None:
        return "–"
    if isinstance(shape, (list, tuple)) and shape and isinstance(shape[0], (list, tuple)):
        return ", ".join(shape_text(s) for s in shape)
    if isinstance(shape, (list, tuple)):
        return "x".join(str(d) for d in shape)
    return str(shape)


def complexity_summary(cx) -> str:
    """One line: parameters, size, FLOPs and MACs of a Complexity."""
    return (f"{format_count(cx.params_total)} params · {format_bytes(cx.size_bytes)} · "
            f"{format_count(cx.flops, 'FLOPs')} ({format_count(cx.macs, 'MACs')}) · "
            f"input {shape_text(cx.input_shape)} {cx.dtype}")


class LayersPane(Vertical):
    """Filled when a model has been analysed."""

    DEFAULT_CSS = "LayersPane { height: 1fr; } LayersPane > DataTable { height: 1fr; }"

    def compose(self) -> ComposeResult:
        yield Static("pick a model to see its layers", id="layers-summary")
        yield DataTable(id="layers-table", cursor_type="row", zebra_stripes=True)

    def on_mount(self) -> None:
        if not self.query(DataTable):
            return  # the app is closing as the pane mounts: its children are already gone
        table = self.query_one(DataTable)
        # FLOPs and their share first: they say where the time is likely to go.
        for key, label in (("name", "layer"), ("type", "type"), ("flops", "FLOPs"), ("share", "% FLOPs"),
                           ("params", "params"), ("out", "output"), ("bytes", "out bytes"),
                           ("intensity", "FLOP/byte"), ("side", "bound")):
            table.add_column(label, key=key)

    def show_complexity(self, spec: str, cx) -> None:
        self.query_one("#layers-summary", Static).update(
            f"[b]{spec}[/] · {complexity_summary(cx)} · {len(cx.layers)} layers")
        table = self.query_one(DataTable)
        table.clear()
        self._row_of = {}
        total = cx.flops or 0
        for i, layer in enumerate(cx.layers):
            self._row_of.setdefault(layer.name, f"{i}")
            share = f"{100.0 * layer.flops / total:.1f}" if total and isinstance(layer.flops, (int, float)) else "–"
            table.add_row(layer.name or "(model)", layer.type, format_count(layer.flops), share,
                          format_count(layer.params), shape_text(layer.output_shape),
                          format_bytes(layer.output_bytes), "–", "–", key=f"{i}")

    _row_of: dict[str, str] = {}

    def show_roofline(self, layers) -> None:
        """Per layer, from a finished run's roofline: arithmetic intensity and the side of the roofline
        (the run's device peaks; "–" where the data does not allow it)."""
        table = self.query_one(DataTable)
        for layer in layers:
            key = self._row_of.get(layer.name)
            if key is None:
                continue
            intensity = layer.intensity
            table.update_cell(key, "intensity", f"{intensity:.1f}" if isinstance(intensity, (int, float)) else "–")
            table.update_cell(key, "side", layer.side if isinstance(layer.side, str) else "–")

    def show_error(self, spec: str, text: str) -> None:
        self.query_one("#layers-summary", Static).update(f"[b]{spec}[/]: [b $error]error:[/] {text}")
        self.query_one(DataTable).clear()
