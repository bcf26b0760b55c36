"""A DataTable whose pane fits a column (a layer's or a model's name) to the width the others leave.

The width is the table's own, not its pane's: a pane that scrolls (History, Kernels) shows its scrollbar only once
its lines are laid out, after the table was filled, and the table then has two columns less than the pane. Fitted
to the pane, the last column in sight was cut by two (p99 at 80x24 under load). The table says when its width
changes (`WidthChanged`), its pane's scrollbar appearing included, so the pane fits it again. The width is
compared with the one the columns were fitted to, not with the last resize's: a table filled while its tab is out of
view has no width, and comes back at the width it had before.
"""

from __future__ import annotations

from collections.abc import Sequence

from rich.cells import cell_len
from rich.text import Text
from textual import events
from textual.message import Message
from textual.widgets import DataTable


def cell_width(cell) -> int:
    """The widest line of a cell as the table shows it (a str is markup to DataTable; a rich Text its plain
    text), in terminal columns."""
    text = Text.from_markup(cell).plain if isinstance(cell, str) else getattr(cell, "plain", None)
    return max(cell_len(line) for line in (text if text is not None else str(cell)).split("\n"))


def column_widths(columns: Sequence[tuple[str, str]], rows: Sequence[Sequence]) -> list[int]:
    """Each column's width at its widest cell or label (its cells' padding not counted)."""
    return [max([cell_width(label)] + [cell_width(row[i]) for row in rows]) for i, (_, label) in enumerate(columns)]


class FittedTable(DataTable):
    """A DataTable that says when its width is not the one its columns were fitted to, and what width they have."""

    class WidthChanged(Message):
        """The table's width is not the one its columns were fitted to: its pane fits them again."""

    def __init__(self, columns: Sequence[tuple[str, str]] = (), **kwargs) -> None:
        super().__init__(**kwargs)
        self._fitted = 0  # the width columns_width last said
        self._columns = tuple(columns)  # the columns it shows, empty, once mounted

    def on_mount(self) -> None:
        if self._columns:
            self.fill(self._columns, [])

    def on_resize(self, event: events.Resize) -> None:
        if event.size.width and event.size.width != self._fitted:
            self._fitted = event.size.width  # said once: the pane's fit sets it again
            self.post_message(self.WidthChanged())

    def fill(self, columns: Sequence[tuple[str, str]], rows: Sequence[Sequence], keys: Sequence[str] | None = None,
             height: int = 1) -> None:
        """The table emptied, with `columns` ((key, label) each) as wide as their widest cell, then `rows` (their
        `keys`, `height` lines each). The widths are said, not left to Textual: it measures new rows when idle, and
        a table refilled to the size it had and drawn before then kept each cell cut to its header's width ('3.0'
        for '3.00 ms', seen in the sweep's table under load)."""
        self.clear(columns=True)
        for (key, label), width in zip(columns, column_widths(columns, rows)):
            self.add_column(label, key=key, width=width)
        for n, row in enumerate(rows):
            self.add_row(*row, key=keys[n] if keys is not None else None, height=height)

    def natural_width(self, columns: Sequence[tuple[str, str]], rows: Sequence[Sequence]) -> int:
        """The width `columns` take with `rows` filled in, each as wide as its widest cell, padding included."""
        return sum(width + 2 * self.cell_padding for width in column_widths(columns, rows))

    def columns_width(self, lines: int, laid_out: int) -> int:
        """The width the columns of rows `lines` lines high in all have without scrolling sideways: the table's
        width less its vertical scrollbar's where they and the header overflow its height (`laid_out`: the width
        to assume before the table is laid out, its pane's)."""
        width = self._fitted = self.size.width or laid_out
        scrollbar = self.styles.scrollbar_size_vertical if lines + 1 > self.size.height else 0
        return width - scrollbar
