"""The line under the History table: the highlighted run whole (its kind, when it finished, its figures, the flags
uncut and its marks in the warning colour), worded by wording/history.py as `history` words its line. At 80 columns
the table cuts the flags in their cell and leaves the time off to the right: this line says them."""

from __future__ import annotations

from textual.content import Content
from textual.widgets import Static

from torchperf_tui.wording.history import history_detail, history_row


class HistoryDetail(Static):
    """The record shown (None: nothing highlighted, the line empty)."""

    def show(self, record) -> None:
        if record is None:
            self.update("")
            return
        marks = history_row(record).marks_text()
        # Content, not markup: text read from a file is shown as it is ('[2J' and all; markup would read it as a tag)
        self.update(Content(history_detail(record)) + (Content.styled(f" · {marks}", "$warning") if marks else ""))
