"""Compare pane: the kept runs in a table (flags, median, p99, speed-up vs the baseline run) and their
latency histograms overlaid."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import DataTable, Static

from torchperf_tui.formatting import format_ms, format_number
from torchperf_tui.app.widgets.timing.histogram import LatencyOverlay

OVERLAY_RUNS = 4


def overlaid_runs(completed: list) -> list:
    """The runs whose histograms are overlaid: the last few, or only the A/B pair when the newest finished
    run is the B arm of an interleaved comparison (its verdict is about those two)."""
    if len(completed) >= 2 and completed[-1].arm == "B" and completed[-2].arm == "A":
        return completed[-2:]
    return completed[-OVERLAY_RUNS:]


class ComparePane(Vertical):
    """Runs side by side; `b` makes the highlighted run the baseline."""

    DEFAULT_CSS = """
    ComparePane { height: 1fr; }
    ComparePane > DataTable { height: auto; max-height: 10; }
    """

    def compose(self) -> ComposeResult:
        yield Static("no runs yet: pick a model and press r", id="compare-note")
        yield Static("a: A/B, the flags before the last flip against the current ones, interleaved in blocks "
                     "with a significance verdict", id="compare-verdict")
        yield DataTable(id="compare-table", cursor_type="row", zebra_stripes=True)
        yield LatencyOverlay(id="latency-overlay")

    def on_mount(self) -> None:
        table = self.query_one(DataTable)
        # The columns that answer "which flags are faster" come first, so they fit at 80 columns.
        for key, label in (("run", "run"), ("flags", "flags"), ("median", "median"), ("p99", "p99"),
                           ("speedup", "speed-up"), ("fps", "FPS"), ("status", "status"), ("model", "model")):
            table.add_column(label, key=key)

    def show_verdict(self, text: str) -> None:
        self.query_one("#compare-verdict", Static).update(text)

    def highlighted_run_id(self) -> int | None:
        table = self.query_one(DataTable)
        if table.row_count == 0:
            return None
        row_key, _ = table.coordinate_to_cell_key((table.cursor_row, 0))
        return int(row_key.value)

    def show_runs(self, history, palette: list[str]) -> None:
        table = self.query_one(DataTable)
        keep = self.highlighted_run_id()
        table.clear()
        base = history.baseline()
        overlaid = overlaid_runs(history.completed())
        colour = {r.run_id: palette[i % len(palette)] for i, r in enumerate(overlaid)}
        for record in history:
            s = record.stats
            speed = "–"
            if base is not None and s is not None and record.complete:
                speed = "baseline" if record is base else f"{base.stats.p50_ms / s.p50_ms:.2f}x"
            label = record.label
            if record.run_id in colour:
                label = f"[{colour[record.run_id]}]■[/] {label}"
            setup = record.flags_text + (f" · shapes {record.shapes}" if record.shapes != "fixed" else "")
            table.add_row(label, setup, format_ms(s.p50_ms) if s else "–",
                          format_ms(s.p99_ms) if s else "–", speed, format_number(s.fps, digits=1) if s else "–",
                          record.status, record.model, key=str(record.run_id))
        if keep is not None and history.get(keep) is not None:
            table.move_cursor(row=table.get_row_index(str(keep)))
        note = self.query_one("#compare-note", Static)
        if len(history) == 0:
            note.update("no runs yet: pick a model and press r")
        else:
            note.update(f"{len(history)} run(s) kept · speed-up = baseline median / run median · "
                        f"b: make highlighted run the baseline")
        self.query_one(LatencyOverlay).show_runs(
            [(f"{r.label} {r.flags_text}", r.samples_ms) for r in overlaid])
