"""History's baseline mark (key b): the highlighted record becomes the baseline each timing run after it is shown
against (app/widgets/timing/baseline_line.py); b on it again unmarks it. A mixin of HistoryPane."""

from __future__ import annotations

from torchperf_tui.core.formatting import printable
from torchperf_tui.wording.conditions import CONDITION_MARK
from torchperf_tui.wording.history import history_row, marks_of
from torchperf_tui.core.errors import user_message
from torchperf_tui.engine.records.baseline import check_usable

MARK = "●"  # a run marked to compare (m)
BASELINE_MARK = "B"
# CONDITION_MARK, a run with a mark (disturbed, GPU throttled, cancelled), goes in this column, not after the 'per'
# cell: there one more character pushed p99 out of sight at 80x24.


class BaselineMark:
    """The marked baseline's record (None: none), and its letter in the mark column."""

    baseline = None

    def mark_cell(self, record_id: str) -> str:
        """The mark column's cell: ● for a run marked to compare, B for the baseline (●B for both), ! for a run
        with a mark."""
        text = MARK if record_id in self.marked else ""
        if self.baseline is not None and self.baseline.id == record_id:
            text += BASELINE_MARK
        record = self.records.get(record_id)
        if record is not None and marks_of(record):
            text += CONDITION_MARK
        return text

    def toggle_baseline(self):
        """Mark the highlighted record as the baseline, or unmark it; -> the baseline now (None: none). A record
        that cannot be one (an A/B arm, no samples) says why and leaves the baseline as it was."""
        record_id = self.highlighted_id()
        record = self.records.get(record_id) if record_id is not None else None
        if record is None:
            self.app.bell()
            return self.baseline
        if self.baseline is not None and self.baseline.id == record.id:
            self.baseline = None
            self.app.notify(f"baseline {printable(record.short_id)} unmarked", timeout=3, markup=False)
        else:
            try:
                check_usable(record)
            except Exception as exc:
                self.app.notify(user_message(exc), title="not a baseline", severity="warning", timeout=6, markup=False)
                return self.baseline
            self.baseline = record
            row = history_row(record)  # printable: the record was read from a file; not markup either
            self.app.notify(f"baseline: {row.short_id} ({row.model}); each timing run (r) is shown against it "
                            "in Timing; b again unmarks it", title="baseline marked", timeout=6, markup=False)
        self._show_baseline_cells()
        return self.baseline

    def _show_baseline_cells(self) -> None:
        from textual.widgets import DataTable

        table = self.query_one(DataTable)
        for rid in self.records:
            table.update_cell(rid, "mark", self.mark_cell(rid))
