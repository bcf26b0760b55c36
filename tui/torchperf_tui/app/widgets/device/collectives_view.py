"""The Device tab's collectives (key L): all_reduce, all_gather and reduce_scatter over message sizes across the box's
GPUs (NCCL), or across processes on the CPU (gloo) where it has fewer than two, as `torchperf-tui collectives` runs
them: the same spec, its device and world chosen in the measurement process. As it runs, a line with the latest size
and a row per collective and size as each arrives; at the end the run's rows, busbw against message size as a plot (a
curve per collective, the link's peak across it) and what time, algbw and busbw are. A section of the pane, its own
widget: it owns its job ("collectives"), and its words are wording.collectives' (the CLI's)."""

from __future__ import annotations

import dataclasses
import math

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.markup import escape
from textual.widgets import Static

from torchperf_tui.app.messages import JobEvent
from torchperf_tui.app.pane_jobs import PaneJobs
from torchperf_tui.app.widgets.fitted_table import FittedTable
from torchperf_tui.app.widgets.log2_axis import Log2Axis
from torchperf_tui.app.widgets.timing.histogram import PlotHolder, nice_ticks, set_text, theme_palette
from torchperf_tui.engine.measurements.collectives import CollectivesSpec, parse_sizes
from torchperf_tui.measure.jobs import KINDS
from torchperf_tui.measure.protocol import JobDone, JobFailed, Progress
from torchperf_tui.wording import WARNING
from torchperf_tui.wording.collectives import (PLOT_X, PLOT_Y, TITLE, cancelled_text, definition_rows, done_text,
                                               elsewhere_text, not_run_text, outcome_rows, peak_line_text, point_line,
                                               progress_line, running_lines, running_text, setup_rows, size_cell,
                                               size_tick, table_cells, table_columns)

# The app's sizes: five (x4 a step) of the three collectives fill the table beside the sidebar at 80x24, and two gloo
# ranks time them in seconds; `torchperf-tui collectives` runs its wider default range and takes --sizes.
APP_SIZES = "16K-4M"
# The columns the table gives up, first to last, where the pane is narrower than every column: busbw (and its share of
# the peak) is what the view is for, algbw and the time are busbw's other sides.
GIVEN_UP = ("time", "algbw")


def header(label: str) -> str:
    """A column's label in the table's two header lines: 'busbw GB/s' over two, so the figures set the width."""
    return "\n".join(label.rsplit(" ", 1))


def packed(entries: list[Text], width: int) -> Text:
    """Legend entries two spaces apart, as many a line as `width` holds: an entry is never split from its mark."""
    lines: list[Text] = []
    for entry in entries:
        if lines and lines[-1].cell_len + 2 + entry.cell_len <= width:
            lines[-1] = Text.assemble(lines[-1], "  ", entry)
        else:
            lines.append(entry)
    return Text("\n").join(lines)


def row_lines(rows) -> str:
    """Rows (label, value, level) as lines of markup, a warning's in the warning colour."""
    lines = []
    for label, value, level in rows:
        line = f"{escape(label)}: {escape(str(value))}"
        lines.append(f"  [$warning]{line}[/]" if level == WARNING else f"  {line}")
    return "\n".join(lines)


class CollectivesPlot(PlotHolder):
    """busbw against the message size (log2), a curve per collective in the order run, the link's peak as a line
    across where there is one; under it a legend naming each."""

    what = "the plot of busbw by message size"
    elsewhere = "the table above has every size"
    empty_text = "no sizes yet"

    DEFAULT_CSS = "CollectivesPlot > .plot-legend { height: auto; }"

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.series: dict[str, list[tuple[int, float]]] = {}  # by collective: (size, busbw GB/s), by size
        self.peak: float | None = None
        self.peak_words = ""

    def compose(self) -> ComposeResult:
        yield from super().compose()
        legend = Static("", classes="plot-legend")
        legend.display = False
        yield legend

    def show(self, series: dict[str, list[tuple[int, float]]], peak: float | None = None, peak_words: str = "") -> None:
        self.series = {op: sorted(points) for op, points in series.items() if points}
        self.peak, self.peak_words = peak, peak_words
        self.request_redraw()

    def has_data(self) -> bool:
        return bool(self.series)

    def redraw(self) -> None:
        super().redraw()
        if self.has_plot:  # the legend goes with the curves it names: not under a placeholder
            self.query_one(".plot-legend", Static).display = self._plot.display

    def draw(self, plot) -> None:
        from textual_plot import HiResMode  # textual-plot: loaded with the plot, after the first frame

        palette = theme_palette(self.app)
        peak_colour = self.app.current_theme.error or palette[-1]
        sizes = [size for points in self.series.values() for size, _ in points]
        top = max([busbw for points in self.series.values() for _, busbw in points] + [self.peak or 0.0])
        names = []
        for i, (op, points) in enumerate(self.series.items()):
            colour = palette[i % len(palette)]
            xs, ys = [math.log2(size) for size, _ in points], [busbw for _, busbw in points]
            plot.plot(xs, ys, line_style=colour, hires_mode=HiResMode.BRAILLE)
            plot.scatter(xs, ys, marker_style=colour)
            names.append(Text.assemble(("■ ", colour), op))
        self.set_labels(plot, PLOT_X, PLOT_Y)
        width = self.size.width - plot.margin_left - 2
        axis = Log2Axis(sizes, max(2, width // 6), size_tick)
        lo, hi = axis.limits()
        if self.peak is not None:
            plot.plot([lo, hi], [self.peak, self.peak], line_style=peak_colour, hires_mode=HiResMode.BRAILLE)
        if self.peak_words:
            names.append(Text.assemble(("─ " if self.peak is not None else "", peak_colour), self.peak_words))
        plot.set_x_formatter(axis.formatter)
        plot.set_xlimits(lo, hi)
        plot.set_xticks(axis.ticks)
        y_top = top * 1.1 if top > 0 else 1.0
        plot.set_ylimits(0, y_top)
        # ticks at round values, one every other row: textual-plot's own, at most 8, skip rows unevenly ('0.3, 0.1')
        rows = self.size.height - plot.margin_top - plot.margin_bottom - 2
        ticks = nice_ticks(0.0, y_top, max(2, rows // 2))
        if ticks:
            plot.set_yticks(ticks)
        set_text(self.query_one(".plot-legend", Static), packed(names, max(self.size.width, 1)))


class CollectivesView(Vertical):
    """The last run of collectives: what runs and the latest size, a row per collective and size, then the result
    (its rows, the plot, the definitions) or why it failed."""

    DEFAULT_CSS = """
    CollectivesView { height: auto; }
    CollectivesView > Static { height: auto; }
    CollectivesView > FittedTable { height: auto; max-height: 100vh; }
    CollectivesView > CollectivesPlot { height: 15; }
    """

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.jobs = PaneJobs(self)
        self.spec = CollectivesSpec(sizes=parse_sizes(APP_SIZES))
        self.points: list = []  # the CollectivePoints of the run shown, in the order they came
        self.result = None  # its CollectivesResult once done; `error` the line of a failed one
        self.error: str | None = None
        self.given_up: list[str] = []  # the labels of the columns the table has no room for
        self._latest = self._now = ""  # while it runs: the latest size timed (point_line), the one timed now
        self.started = False  # whether L has run since the app started: until then the status says what L runs

    def compose(self) -> ComposeResult:
        yield Static(f"\n[b]{TITLE}[/]: {escape(self._not_run())}", id="collectives-status")
        table = FittedTable(id="collectives-table", cursor_type="none", zebra_stripes=True, header_height=2)
        table.display = False
        yield table
        elsewhere = Static("", id="collectives-elsewhere", classes="legend")
        elsewhere.display = False
        yield elsewhere
        plot = CollectivesPlot(id="collectives-plot")
        plot.display = False
        yield plot
        for id_ in ("collectives-rows", "collectives-definitions"):
            rows = Static("", id=id_)
            rows.display = False  # until a run has its rows
            yield rows

    def _not_run(self) -> str:
        session = self.app.session
        on_cpu = ("the device chosen" if session.device == "cpu" else
                  "no CUDA device here" if session.report is not None and not session.report.cuda_available else "")
        return not_run_text(self.spec, KINDS["collectives"].keys[0], on_cpu)

    def device_known(self) -> None:
        """The device probed or chosen: before the first run, say where L would run now."""
        if not self.started:
            self.say(escape(self._not_run()))

    def say(self, text: str, after: str = ": ") -> None:
        """The status line after the section's title (markup)."""
        set_text(self.query_one("#collectives-status", Static), f"\n[b]{TITLE}[/]{after}{text}")

    # -- the job ------------------------------------------------------------------------------------------------
    def start(self) -> None:
        """Run the collectives (replacing any measurement in flight); the last run's rows and plot are cleared."""
        if not self.screen.engine_ready("collectives", "collectives"):
            return
        self.screen.show_tab("device")
        # The device selector's CPU is a choice the ranks keep (gloo across processes); a GPU or auto leaves the choice
        # to the measurement process, as the CLI's default: NCCL across the box's GPUs where it has two or more.
        self.spec = dataclasses.replace(self.spec, device="cpu" if self.app.session.device == "cpu" else "auto")
        self.points, self.result, self.error = [], None, None
        self._latest = self._now = ""
        self.started = True
        for id_ in ("collectives-rows", "collectives-definitions"):
            self.query_one(f"#{id_}", Static).display = False
        self._fill()
        self._say_running()
        self.jobs.start("collectives", {"spec": self.spec}, running_text(self.spec))
        self.call_after_refresh(self.scroll_visible, top=True, animate=False)

    @on(JobEvent)
    def _job_event(self, message: JobEvent) -> None:
        event = self.jobs.accept(message)
        if isinstance(event, Progress) and event.what == "collective_point":
            self.points.append(event.data)
            self._latest, self._now = point_line(event.data, aligned=False), ""
            self._say_running()
            self._fill()
        elif isinstance(event, Progress) and event.what == "collective_progress":
            self._now = progress_line(*event.data)
            self._say_running()
        elif isinstance(event, JobFailed) and event.cancelled:
            self.say(escape(cancelled_text(bool(self.points))))
        elif isinstance(event, JobFailed):
            self.error = event.error
            self.say(f"[b $error]error:[/] {escape(event.error)}")
            self.app.notify(event.error, title="collectives failed", severity="error", timeout=8)
        elif isinstance(event, JobDone):
            self.show_result(event.result)

    def _say_running(self) -> None:
        """What runs, the latest size timed on every rank and the one being timed."""
        self.say(escape("\n".join(running_lines(self.spec, self._latest, self._now))))

    def show_result(self, result) -> None:
        """The run: its title and state, the table from the result's points, the plot with the link's peak, the rows
        and the definitions."""
        self.result = result
        self.points = list(result.points)
        self.say(escape(done_text(result)), after=" ")
        self._fill()
        # what the table's figures are, where it has any (a run cancelled as its ranks started has none)
        for id_, rows in (("collectives-rows", setup_rows(result) + outcome_rows(result)),
                          ("collectives-definitions", definition_rows() if self.points else [])):
            static = self.query_one(f"#{id_}", Static)
            static.update(row_lines(rows))
            static.display = bool(rows)
        self.call_after_refresh(self._in_sight)

    def _in_sight(self) -> None:
        """The section's top in sight, then as little less of it as shows the whole table (80x24 beside the sidebar
        has a few rows too few for both)."""
        self.scroll_visible(top=True, animate=False)
        if self.points:
            self.query_one(FittedTable).scroll_visible(animate=False)

    # -- the table and the plot ---------------------------------------------------------------------------------
    def _peak(self) -> bool:
        """The table has a column for busbw's share of the link's peak: the run has a peak."""
        if self.result is not None:
            return isinstance(self.result.peak_gbs, float)
        return any(point.peak_pct is not None for point in self.points)

    def _fill(self) -> None:
        """A row per point, the columns that fit the table's width (GIVEN_UP says which go first), and the plot."""
        table = self.query_one(FittedTable)
        peak = self._peak()
        columns = [(key, header(label)) for key, label in table_columns(peak)]
        cells = [dict(zip([key for key, _ in columns], table_cells(point, peak))) for point in self.points]
        # Never a vertical scrollbar to leave room for (max-height: 100vh holds every size the app runs), so the width
        # is the table's, or the section's before the table is laid out (hidden until its first row).
        width = table.size.width or self.size.width
        # The columns given up are chosen for every collective and size the run will have, not only those in: a
        # table that lost a column halfway through the run (reduce_scatter's name is the longest) would jump.
        to_come = {"op": max(self.spec.ops, key=len),
                   "size": max((size_cell(size) for size in self.spec.message_sizes()), key=len)}
        given_up = []
        for key in GIVEN_UP:
            shown = [[row.get(k, "") for k, _ in columns] for row in cells + [to_come]]
            if width <= 0 or table.natural_width(columns, shown) <= width:
                break
            given_up += [label.replace("\n", " ") for k, label in columns if k == key]
            columns = [column for column in columns if column[0] != key]
        table.fill(columns, [[row[key] for key, _ in columns] for row in cells])
        table.display = bool(self.points)
        self.given_up = given_up
        elsewhere = self.query_one("#collectives-elsewhere", Static)
        sidebar = self.screen.query("#sidebar")
        elsewhere.update(elsewhere_text(given_up, sidebar=bool(sidebar) and sidebar.first().display) if given_up
                         else "")
        elsewhere.display = bool(given_up and self.points)
        self._replot()

    @on(FittedTable.WidthChanged)
    def _refit(self) -> None:
        self._fill()

    def _replot(self) -> None:
        series: dict[str, list[tuple[int, float]]] = {}
        for point in self.points:
            series.setdefault(point.op, []).append((point.size_bytes, point.busbw_gbs))
        plot = self.query_one(CollectivesPlot)
        result = self.result
        peak = result.peak_gbs if result is not None and isinstance(result.peak_gbs, float) else None
        plot.show(series, peak, peak_line_text(result) if result is not None else "")
        plot.display = bool(series)
