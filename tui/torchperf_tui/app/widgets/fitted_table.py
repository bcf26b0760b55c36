"""A DataTable whose pane fits a column (a layer's or a model's name) to the width the others leave.

The width is the table's own, not its pane's: a pane that scrolls (History, Kernels) shows its scrollbar only once
its lines are laid out, after the table was filled, and the table then has two columns less than the pane. Fitted
to the pane, the last column in sight was cut by two (p99 at 80x24 under load). The table says when its width
changes (`WidthChanged`), its pane's scrollbar appearing included, so the pane fits it again. The width is
compared with the one the columns were fitted to, not with the last resize's: a table filled while its tab is out of
view has no width, and comes back at the width it had before.
"""

from __future__ import annotations

from textual import events
from textual.message import Message
from textual.widgets import DataTable


class FittedTable(DataTable):
    """A DataTable that says when its width is not the one its columns were fitted to, and what width they have."""

    class WidthChanged(Message):
        """The table's width is not the one its columns were fitted to: its pane fits them again."""

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self._fitted = 0  # the width columns_width last said

    def on_resize(self, event: events.Resize) -> None:
        if event.size.width and event.size.width != self._fitted:
            self._fitted = event.size.width  # said once: the pane's fit sets it again
            self.post_message(self.WidthChanged())

    def columns_width(self, lines: int, laid_out: int) -> int:
        """The width the columns of rows `lines` lines high in all have without scrolling sideways: the table's
        width less its vertical scrollbar's where they and the header overflow its height (`laid_out`: the width
        to assume before the table is laid out, its pane's)."""
        width = self._fitted = self.size.width or laid_out
        scrollbar = self.styles.scrollbar_size_vertical if lines + 1 > self.size.height else 0
        return width - scrollbar
