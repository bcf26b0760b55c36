"""History pane: past runs from the history file, a page at a time, newest first; mark two (m or ⏎) to compare
them, on one page or on two; v shows the change points of the highlighted run's set-up over the whole file.

The pane reads its own pages (`show_history(path)`), backwards from the end of the file, so a history of any
size costs a page of records in memory and a page's read on screen: ] shows the page of older runs, [ the
newer one. A LoadResult handed to `show_records` is shown the same way, a page of its newest records.

Each row is worded as `history` words its line (wording/history.py): what its figures are per, a '!' when the run
has a mark; the line under the table says the highlighted run whole, flags and marks uncut.
"""

from __future__ import annotations

from pathlib import Path

from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.message import Message
from rich.text import Text
from textual.content import Content
from textual.widgets import DataTable, Static
from textual.worker import get_current_worker

from torchperf_tui.app.widgets.history.baseline_mark import CONDITION_MARK, BaselineMark
from torchperf_tui.app.widgets.fitted_table import FittedTable
from torchperf_tui.app.widgets.history.history_detail import HistoryDetail
from torchperf_tui.core.stats import percentile_supported
from torchperf_tui.core.formatting import COMPACT_UNSUPPORTED, UNSUPPORTED_LEGEND, fit_name, printable, shorten_parts
from torchperf_tui.wording.history import history_row
from torchperf_tui.wording.history_changes import empty_series_lines, series_lines
from torchperf_tui.core.errors import user_message
from torchperf_tui.engine.records.history_file import HistoryFile, default_history_path
from torchperf_tui.engine.records.history_compare import compare_records
from torchperf_tui.engine.records.change_points import history_changes
from torchperf_tui.engine.records.fleet_records import setup_name

# What a row is (per: 'pass', 'token', an A/B arm's 'A pass') and its figures first, then when it finished: at 80
# columns beside the sidebar the pane is some 44 wide, and the line under the table says the highlighted row whole.
# The id comes last: it names a run once told apart (with the id second, two runs whose percentiles read
# '26.73 ms?' pushed p99 out of sight).
COLUMNS = (("mark", " "), ("per", "per"), ("model", "model"), ("p50", "p50"), ("p99", "p99"),
           ("when", "when (UTC)"), ("flags", "flags"), ("input", "input"), ("device", "device"), ("id", "id"))
MIN_MODEL = 8
MARKS_LEGEND = f"{CONDITION_MARK} = the run's figures have a mark (disturbed, GPU throttled, cancelled): the line " \
               "under the table says it whole"


# one line beside the sidebar at 80 columns: a second one cost the table a row, and its width p99 (the Help says more)
COMPACT_MARKS = f"{CONDITION_MARK} a mark (said below)"
NARROW = 60  # a pane narrower than this says the legend compactly


def model_width(rows: list[list[str]], width: int) -> int:
    """The model's column in a table `width` wide: what the mark, per, p50 and p99 leave (each column its widest cell
    + 2), less the time's column where that leaves MIN_MODEL (at 80 columns it does not: the line under the table
    says the highlighted run's time)."""
    widths = {key: max([len(label)] + [len(row[i]) for row in rows]) + 2 for i, (key, label) in enumerate(COLUMNS)}
    rest = width - sum(widths[key] for key in ("mark", "per", "p50", "p99")) - 2  # 2: the model's own padding
    return max(MIN_MODEL, rest - widths["when"] if rest - widths["when"] >= MIN_MODEL else rest)


def legend(records, marks: list[str], compact: bool = False) -> str | None:
    """The line under the table: what its '?' and '!' mean, where it shows one (`marks`: its mark cells);
    `compact`, in a few words each, on one line (beside the sidebar at 80 columns the whole words took four lines
    and the table its fifth run)."""
    # p99 needs the most samples: a '?' beside any p50 or p99 means one beside that run's p99
    unsupported = any(r.stats is not None and not percentile_supported(0.99, r.stats.n) for r in records)
    marked = any(CONDITION_MARK in mark for mark in marks)
    forms = ((COMPACT_UNSUPPORTED, COMPACT_MARKS) if compact else (UNSUPPORTED_LEGEND, MARKS_LEGEND))
    shown = [text for text, show in zip(forms, (unsupported, marked)) if show]
    return (" · " if compact else "\n").join(shown) or None


def home_short(path) -> str:
    """The path with the home directory as ~ (the note wraps less at 80 columns)."""
    text, home = str(path), str(Path.home())
    return "~" + text[len(home):] if home != "/" and text.startswith(home + "/") else text


def fit_model(model: str, width: int) -> str:
    """A model's name in `width` characters: a module:factory keeps its factory whole and elides the middle of
    the module's words first ('tests.tiny…s:tiny_cnn', as a layer path is cut), then cuts from the left; a
    torchvision name keeps its start. A model with overrides ('hf:llama (num_hidden_layers=2,...)') keeps its name
    and cuts the overrides ('hf:llama (num_hid…)'): which model comes first, its whole settings are in the line
    under the table."""
    if len(model) <= width:
        return model
    name, paren, overrides = model.partition(" (")
    if paren:
        room = width - len(name) - len(" (…)")
        if room >= 1:
            return f"{name} ({overrides[:room]}…)"
        return fit_model(name + "…", width) if len(name) + 1 > width else name + "…"
    module, sep, factory = model.rpartition(":")
    if not sep:
        return fit_name(model, width) if "." in model else model[: width - 1] + "…"
    parts, need = shorten_parts(module.split("."), len(model) - width)
    text = ".".join(parts) + ":" + factory
    if need <= 0 and len(text) <= width:
        return text
    if len(factory) + 2 <= width:  # the module's words cannot shrink enough: the factory, said to be in one
        return "…:" + factory
    return "…" + factory[len(factory) - width + 1:]


def flag_value(value) -> str:
    if isinstance(value, bool):
        return "on" if value else "off"
    return "default" if value is None else printable(value, 80)  # read from a file


def comparison_text(comparison) -> str:
    """compare_records(...).summary() and, one per line, each flag (and set-up field) that differs
    (the summary says "flags: same" when none does)."""
    lines = [comparison.summary()]
    for name, (a, b) in comparison.flags_diff.items():
        lines.append(f"  flag {printable(name, 40)}: {flag_value(a)} -> {flag_value(b)}")
    for name, (a, b) in comparison.setup_diff.items():
        lines.append(f"  set-up {printable(name, 40)}: {flag_value(a)} -> {flag_value(b)}")
    return "\n".join(lines)


class HistoryPane(BaselineMark, Vertical):
    """A page of the history file (at most PAGE_SIZE runs, newest first), and the marked runs, at most two,
    kept with their records so that a run marked on one page can be compared with one on another."""

    PAGE_SIZE = 200

    # The table keeps its header, five runs and its horizontal scrollbar however long the highlighted run's lines
    # wrap at 80 columns beside the sidebar (a new user saw one row of six); the pane scrolls to what does not fit.
    DEFAULT_CSS = """
    HistoryPane { height: 1fr; overflow-y: auto; }
    HistoryPane > Static { height: auto; }
    HistoryPane > DataTable { height: 1fr; min-height: 7; }
    """

    BINDINGS = [
        Binding("right_square_bracket", "older_page", "Older runs", show=False),  # the note names them
        Binding("left_square_bracket", "newer_page", "Newer runs", show=False),
        Binding("v", "show_changes", "Change points", show=False),
    ]

    class Loaded(Message):
        """A page of the history is shown; `loaded` is its LoadResult (warnings: at most one line)."""

        def __init__(self, loaded) -> None:
            super().__init__()
            self.loaded = loaded

    class _PageRead(Message, bubble=False):
        """The pane's reader thread has a page (`before`: which one), or the one-line error reading it."""

        def __init__(self, before: int | None, loaded=None, error: str | None = None) -> None:
            super().__init__()
            self.before, self.loaded, self.error = before, loaded, error

    class _ChangesFound(Message, bubble=False):
        """The change points of set-up `setup` in words (`lines`), or the one-line error reading the history."""

        def __init__(self, setup: str, lines: list[str] | None = None, error: str | None = None) -> None:
            super().__init__()
            self.setup, self.lines, self.error = setup, lines, error

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.changes_setup: str | None = None  # the set-up whose change points are shown (v), None: none
        self.records: dict[str, object] = {}  # the page shown, id -> record, newest first
        self.marked: list[str] = []
        self._marked_records: dict[str, tuple[int, object]] = {}  # id -> (byte offset in the file, record)
        self._offsets: dict[str, int] = {}  # id -> byte offset of the page's records
        self.path: Path | None = None
        # (before, runs on newer pages) for each page from the newest to the one shown: `before` is the byte
        # offset the page ends at (None: the end of the file), as HistoryFile.load(last=..., before=...) takes it.
        self._pages: list[tuple[int | None, int]] = [(None, 0)]
        self._older: int | None = None  # `before` of the next older page; None: the oldest page is shown
        self._loading = False

    def compose(self) -> ComposeResult:
        yield Static("loading the history…", id="history-note", classes="loading")
        yield FittedTable(COLUMNS, id="history-table", cursor_type="row", zebra_stripes=True)
        yield HistoryDetail("", id="history-detail")  # the highlighted row whole: the table cuts its flags
        yield Static("mark two runs (m or ⏎ on a row) to compare them", id="history-compare")
        changes = Static("", id="history-changes")  # v: the highlighted run's set-up, its change points
        changes.display = False
        yield changes
        # what the table's marks mean, when it shows one: a tooltip is out of reach of a keyboard over SSH
        yield Static("", id="history-legend", classes="dim-note")

    @on(FittedTable.WidthChanged)
    def _refit(self) -> None:
        if self.records:
            self._fill_table()

    # -- feeding the pane ---------------------------------------------------------------------------
    _stale = True  # the file changed (or was never read) since the page shown was read

    def refresh_history(self) -> None:
        """Reload the page shown now if the tab is shown, else when it next is."""
        self._stale = True
        if self.screen.active_tab() == "history" and self.app.session.has("history_file"):
            self._stale = False
            self.show_history(self.app.session.history_path)

    def on_shown(self) -> None:
        # Marking runs needs the row cursor: the table takes the focus (r, t, p, / still work there).
        self.query_one(DataTable).focus()
        if self._stale:
            self.refresh_history()

    def show_history(self, path: str | Path | None) -> None:
        """Read the page shown (at first the newest) of the history at `path` (None: the default history)
        again, in a thread; a new run appears on the newest page, an older page stays where it is."""
        path = default_history_path(path)
        if path != self.path:
            self.path = path
            self._pages = [(None, 0)]
            self.marked, self._marked_records = [], {}
        self._read_page()

    def show_records(self, loaded) -> None:
        """Show a LoadResult read elsewhere as the newest page: its newest PAGE_SIZE records, newest first."""
        if loaded.path is not None and loaded.path != self.path:
            self.marked, self._marked_records = [], {}
        self.path = loaded.path
        self._pages = [(None, 0)]
        self._show_page(loaded)

    def action_older_page(self) -> None:
        if self._loading or self.path is None or self._older is None:
            self.app.bell()  # the oldest runs are shown (or a page is on its way)
            return
        before, newer = self._pages[-1]
        self._pages.append((self._older, newer + len(self.records)))
        self._read_page()

    def action_newer_page(self) -> None:
        if self._loading or len(self._pages) == 1:
            self.app.bell()
            return
        self._pages.pop()
        self._read_page()

    def _read_page(self) -> None:
        self._loading = True
        note = self.query_one("#history-note", Static)
        note.add_class("loading")
        self._load_page(self.path, self._pages[-1][0], self.PAGE_SIZE)

    @work(thread=True, exclusive=True, group="history-page", exit_on_error=False)
    def _load_page(self, path: Path, before: int | None, size: int) -> None:
        """A page read backwards from `before` (values, not the pane's attributes: this runs in a thread)."""
        try:
            loaded = HistoryFile(path).load(last=size, before=before)
        except Exception as exc:  # a FIFO, a folder, an unreadable file: one line on the pane
            message = self._PageRead(before, error=user_message(exc))
        else:
            message = self._PageRead(before, loaded=loaded)
        if not get_current_worker().is_cancelled:
            self.post_message(message)

    @on(_PageRead)
    def _page_read(self, message: _PageRead) -> None:
        if message.before != self._pages[-1][0]:
            return  # a page the user has since paged away from
        self._loading = False
        if message.error is not None:
            self.show_error(message.error)
            return
        self._show_page(message.loaded)

    # -- showing a page -----------------------------------------------------------------------------
    def _show_page(self, loaded) -> None:
        """Newest first; the highlighted row and the marks survive a refresh of the same page."""
        self._loading = False
        keep = self.highlighted_id()
        records, offsets = loaded.records[-self.PAGE_SIZE:], self._offsets_of(loaded)[-self.PAGE_SIZE:]
        if len(loaded.records) > self.PAGE_SIZE:
            self._older = offsets[0]  # a whole file was handed over: the next page ends where this one starts
        else:
            self._older = loaded.start if loaded.more_before else None
        self.records, self._offsets = {}, {}
        for record, offset in zip(reversed(records), reversed(offsets)):
            if record.id not in self.records:  # an id twice in the file (a line copied): the newer one
                self.records[record.id] = record
                self._offsets[record.id] = offset
        self._fill_table(keep)
        self._show_note(loaded)
        if loaded.warnings:  # its bad lines in one notification, one line however many
            self.app.notify("\n".join(loaded.warnings), title="history: lines skipped", severity="warning",
                            timeout=8, markup=False)  # they quote the file's values: words, not markup
        self.show_marked_comparison()
        self.post_message(self.Loaded(loaded))

    def _fill_table(self, keep: str | None = None) -> None:
        table = self.query_one(FittedTable)
        keep = keep if keep is not None else self.highlighted_id()
        rows = []
        for r in self.records.values():
            row = history_row(r)  # every string printable: a record's are read from a file
            rows.append([self.mark_cell(r.id), row.compact_per(), row.model, row.p50, row.p99, row.when[5:], row.compact_flags(),
                         row.input, row.device, row.short_id, r.id])
        width = model_width(rows, table.columns_width(len(rows), laid_out=self.scrollable_content_region.width))
        for row in rows:
            row[2] = fit_model(row[2], width)
        # Text, not markup: a model's name or flags read from a file are shown as they are ('[b]' and all)
        table.fill(COLUMNS, [[Text(cell) for cell in row[:-1]] for row in rows], keys=[row[-1] for row in rows])
        text = legend(self.records.values(), [row[0] for row in rows], compact=self.size.width < NARROW)
        marks = self.query_one("#history-legend", Static)
        marks.update(text or "")
        marks.display = text is not None
        if keep in self.records:
            table.move_cursor(row=table.get_row_index(keep))
        self._show_detail()

    @on(DataTable.RowHighlighted, "#history-table")
    def _row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        self._show_detail()

    def _show_detail(self) -> None:
        self.query_one(HistoryDetail).show(self.records.get(self.highlighted_id() or ""))

    @staticmethod
    def _offsets_of(loaded) -> list[int]:
        """Each record's byte offset; a LoadResult made by hand has none: its order stands in."""
        offsets = list(getattr(loaded, "offsets", None) or [])
        return offsets if len(offsets) == len(loaded.records) else list(range(len(loaded.records)))

    def _show_note(self, loaded) -> None:
        note = self.query_one("#history-note", Static)
        note.remove_class("loading")
        skipped_count = getattr(loaded, "skipped", len(loaded.warnings))
        skipped = f" · {skipped_count} bad line(s) skipped" if skipped_count else ""
        newer = self._pages[-1][1]
        shown = len(self.records)
        if newer == 0 and self._older is None:
            if not shown:
                note.update(f"no runs recorded yet ({home_short(loaded.path)}){skipped}")
            else:
                note.update(f"{shown} run(s), newest first, in {home_short(loaded.path)}{skipped}")
            return
        keys = " · ".join(k for k, show in (("\\[ newer", newer > 0), ("] older", self._older is not None)) if show)
        if newer == 0:
            where = f"the newest {shown} runs"
        elif shown:
            where = f"runs {newer + 1}–{newer + shown} counting back from the newest"
        else:
            where = f"no runs before the newest {newer}"
        note.update(f"{where}, newest first, in {home_short(loaded.path)}{skipped} · {keys}")

    def show_error(self, text: str) -> None:
        self._loading = False
        note = self.query_one("#history-note", Static)
        note.remove_class("loading")
        note.update(Content.from_markup("[b $error]error:[/] ") + Content(text))  # the text quotes a path: not markup

    # -- the change points of a set-up (v) ------------------------------------------------------------
    def action_show_changes(self) -> None:
        """The change points of the highlighted run's set-up over the whole history file (not only the page), as
        `history --changes` says them; v again on a run of that set-up hides them."""
        record = self.records.get(self.highlighted_id() or "")
        if record is None or self.path is None:
            self.app.bell()
            return
        shown = self.query_one("#history-changes", Static)
        setup = setup_name(record)
        if shown.display and setup == self.changes_setup:
            self.changes_setup, shown.display = None, False
            return
        self.changes_setup, shown.display = setup, True
        shown.update(Content(f"finding the change points of {setup}…"))  # not markup: a model's name from a file
        self._find_changes(self.path, setup)

    @work(thread=True, exclusive=True, group="history-changes", exit_on_error=False)
    def _find_changes(self, path: Path, setup: str) -> None:
        """The set-up's series read from the whole file, twice (its medians, then the runs beside a change point),
        in a thread: ruptures and scipy take a second to import, a long history longer to read."""
        history = HistoryFile(path)

        def series():
            return (record for record in history.stream() if setup_name(record) == setup)

        try:
            found = history_changes(series(), series)
        except Exception as exc:  # a file gone or replaced by a folder since the page was read: one line
            message = self._ChangesFound(setup, error=user_message(exc))
        else:
            message = self._ChangesFound(setup, series_lines(found[0]) if found else empty_series_lines(setup))
        if not get_current_worker().is_cancelled:
            self.post_message(message)

    @on(_ChangesFound)
    def _changes_found(self, message: _ChangesFound) -> None:
        if message.setup != self.changes_setup:
            return  # hidden, or another set-up asked for since
        shown = self.query_one("#history-changes", Static)
        if message.error is not None:
            shown.update(Content.from_markup("[b $error]error:[/] ") + Content(message.error))
            return
        shown.update(Content("\n".join(message.lines)))  # not markup: ids and values come from a file

    # -- marking and comparing ------------------------------------------------------------------------
    def highlighted_id(self) -> str | None:
        table = self.query_one(DataTable)
        if table.row_count == 0:
            return None
        row_key, _ = table.coordinate_to_cell_key((table.cursor_row, 0))
        return row_key.value

    def mark(self, record_id: str | None = None) -> None:
        """Mark (or unmark) a row (the highlighted one by default); with two marked, compare them."""
        self.toggle_mark(record_id)
        self.show_marked_comparison()

    @on(DataTable.RowSelected, "#history-table")
    def _row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        self.mark(event.row_key.value)

    def show_marked_comparison(self) -> None:
        pair = self.marked_pair()
        if pair is None:
            self.show_comparison(f"{len(self.marked)} of the 2 runs to compare marked (m or ⏎)")  # not 2 in all
            return
        try:
            comparison = compare_records(*pair)
        except Exception as exc:
            self.show_comparison(Content.from_markup("[b $error]error:[/] ") + Content(user_message(exc)))
            return
        self.show_comparison(Content(comparison_text(comparison)))  # not markup: flags' values come from a file

    def toggle_mark(self, record_id: str | None = None) -> list[str]:
        """Mark (or unmark) a row; a third mark drops the oldest. Returns the marked ids, oldest mark first."""
        record_id = record_id or self.highlighted_id()
        if record_id is None or record_id not in self.records:
            return self.marked
        if record_id in self.marked:
            self.marked.remove(record_id)
            self._marked_records.pop(record_id, None)
        else:
            self.marked = (self.marked + [record_id])[-2:]
            self._marked_records[record_id] = (self._offsets[record_id], self.records[record_id])
            self._marked_records = {rid: self._marked_records[rid] for rid in self.marked}
        table = self.query_one(DataTable)
        for rid in self.records:
            table.update_cell(rid, "mark", self.mark_cell(rid))
        return self.marked

    def marked_pair(self):
        """The two marked records, the older run (earlier in the file) first as the baseline, or None."""
        if len(self.marked) != 2:
            return None
        older, newer = sorted((self._marked_records[rid] for rid in self.marked), key=lambda item: item[0])
        return older[1], newer[1]

    def show_comparison(self, text: str | Content) -> None:
        self.query_one("#history-compare", Static).update(text)
