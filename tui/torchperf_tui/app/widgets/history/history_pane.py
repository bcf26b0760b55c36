"""History pane: past runs from the history file, newest first; mark two (m or ⏎) to compare them."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import DataTable, Static

from torchperf_tui.formatting import format_ms

MARK = "●"


def flag_value(value) -> str:
    if isinstance(value, bool):
        return "on" if value else "off"
    return "default" if value is None else str(value)


def comparison_text(comparison) -> str:
    """compare_records(...).summary() and, one per line, each flag (and set-up field) that differs
    (the summary says "flags: same" when none does)."""
    lines = [comparison.summary()]
    for name, (a, b) in comparison.flags_diff.items():
        lines.append(f"  flag {name}: {flag_value(a)} -> {flag_value(b)}")
    for name, (a, b) in comparison.setup_diff.items():
        lines.append(f"  set-up {name}: {flag_value(a)} -> {flag_value(b)}")
    return "\n".join(lines)


class HistoryPane(Vertical):
    """The app feeds it LoadResults; it keeps which rows (record ids) are marked, at most two."""

    DEFAULT_CSS = """
    HistoryPane { height: 1fr; }
    HistoryPane > Static { height: auto; }
    HistoryPane > DataTable { height: 1fr; }
    """

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.records: dict[str, object] = {}
        self.marked: list[str] = []

    def compose(self) -> ComposeResult:
        yield Static("loading the history…", id="history-note", classes="loading")
        yield DataTable(id="history-table", cursor_type="row", zebra_stripes=True)
        yield Static("mark two runs (m or ⏎ on a row) to compare them", id="history-compare")

    def on_mount(self) -> None:
        table = self.query_one(DataTable)
        # What tells runs apart first (p50, p99, flags), so it fits at 80 columns.
        for key, label in (("mark", " "), ("id", "id"), ("p50", "p50"), ("p99", "p99"), ("flags", "flags"),
                           ("model", "model"), ("input", "input"), ("device", "device"),
                           ("when", "when (UTC)")):
            table.add_column(label, key=key)

    def show_records(self, loaded) -> None:
        """Newest first; the highlighted row and the marks survive a refresh."""
        table = self.query_one(DataTable)
        keep = self.highlighted_id()
        newest_first = list(reversed(loaded.records))
        self.records = {r.id: r for r in newest_first}
        self.marked = [m for m in self.marked if m in self.records]
        table.clear()
        for r in newest_first:
            s = r.stats
            table.add_row(MARK if r.id in self.marked else "", r.short_id,
                          format_ms(s.p50_ms) if s else "–", format_ms(s.p99_ms) if s else "–",
                          r.flags_text + (" (cancelled)" if r.cancelled else ""), r.model,
                          f"{r.shape_text} {r.dtype}", r.device, r.created_at.replace("T", " ")[5:16], key=r.id)
        if keep in self.records:
            table.move_cursor(row=table.get_row_index(keep))
        note = self.query_one("#history-note", Static)
        note.remove_class("loading")
        skipped = f" · {len(loaded.warnings)} bad line(s) skipped" if loaded.warnings else ""
        if not newest_first:
            note.update(f"no runs recorded yet ({loaded.path}){skipped}")
        else:
            note.update(f"{len(newest_first)} run(s) in {loaded.path}, newest first{skipped}")

    def show_error(self, text: str) -> None:
        note = self.query_one("#history-note", Static)
        note.remove_class("loading")
        note.update(f"[b $error]error:[/] {text}")

    def highlighted_id(self) -> str | None:
        table = self.query_one(DataTable)
        if table.row_count == 0:
            return None
        row_key, _ = table.coordinate_to_cell_key((table.cursor_row, 0))
        return row_key.value

    def toggle_mark(self, record_id: str | None = None) -> list[str]:
        """Mark (or unmark) a row; a third mark drops the oldest. Returns the marked ids, oldest mark first."""
        record_id = record_id or self.highlighted_id()
        if record_id is None or record_id not in self.records:
            return self.marked
        if record_id in self.marked:
            self.marked.remove(record_id)
        else:
            self.marked = (self.marked + [record_id])[-2:]
        table = self.query_one(DataTable)
        for rid in self.records:
            table.update_cell(rid, "mark", MARK if rid in self.marked else "")
        return self.marked

    def marked_pair(self):
        """The two marked records, the older run (earlier in the file) first as the baseline, or None."""
        if len(self.marked) != 2:
            return None
        order = list(self.records)  # newest first
        older, newer = sorted(self.marked, key=order.index, reverse=True)
        return self.records[older], self.records[newer]

    def show_comparison(self, text: str) -> None:
        self.query_one("#history-compare", Static).update(text)
