"""Latency histograms drawn with textual-plot: one that fills live during a run, and an overlay of
several runs on shared bins with a legend. Both span the bulk of the samples (a few stalls of a busy host would
squash it into one bar) and say at their right edge how many samples lie outside. A plot without the rows to show
its data says so, and where to see it. textual-plot is imported only after the first frame."""

from __future__ import annotations

import math
import textwrap
from typing import Sequence

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import Static

from torchperf_tui.app.pace import Pace
from torchperf_tui.core.stats import bulk_range, runs_bulk_range
from torchperf_tui.wording.timing import outside_bulk_text


def histogram_bins(samples: Sequence[float], bins: int, lo: float | None = None,
                   hi: float | None = None) -> tuple[list[float], list[int], float]:
    """Equal-width bins over [lo, hi]: (centres, counts, width); values outside are not counted."""
    if not samples:
        return [], [], 0.0
    lo = min(samples) if lo is None else lo
    hi = max(samples) if hi is None else hi
    if hi <= lo:
        # All samples equal (or one sample): one visible bar around the value.
        width = max(abs(lo) * 0.01, 1e-6)
        return [lo], [len(samples)], width
    width = (hi - lo) / bins
    import numpy as np  # loaded by the engine before any sample exists; not at app import

    counts = np.histogram(np.asarray(samples, dtype=float), bins=bins, range=(lo, hi))[0].tolist()
    centres = [lo + (i + 0.5) * width for i in range(bins)]
    return centres, counts, width


def bin_count(n: int) -> int:
    """About sqrt(n) bins, between 5 and 40, so a few samples still show a shape."""
    return max(5, min(40, int(math.sqrt(max(n, 1))) + 1))


def nice_ticks(lo: float, hi: float, most: int) -> list[float]:
    """About `most` ticks (at most one more) in [lo, hi] at a step of 1, 2 or 5 times a power of ten."""
    if not (math.isfinite(lo) and math.isfinite(hi)) or hi <= lo or most < 1:
        return []
    raw = (hi - lo) / most
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 5, 10) if m * power >= raw)
    first = math.ceil(lo / step) * step
    return [round(first + i * step, 12) for i in range(int((hi - first) / step + 1e-9) + 1)]


def theme_palette(app) -> list[str]:
    """Run colours from the current theme (no hard-coded colours): distinguishable in order."""
    theme = app.current_theme
    colours = [theme.primary, theme.warning, theme.success, theme.accent, theme.error, theme.secondary]
    return list(dict.fromkeys(c for c in colours if c))  # a theme may give two roles one colour: each once


def set_text(static: Static, content) -> None:
    """`content` in `static`, updated only where it differs: a Static's update lays out the whole screen again, and
    a plot's redraw sets the same caption, note and placeholder time after time."""
    if static.content != content:
        static.update(content)


# Below this height a plot's default margins (2 rows above, 3 below, the axis box) leave no room for bars:
# the axis labels become one caption line above the plot and the margins shrink to the tick labels.
COMPACT_BELOW_ROWS = 14
# Below this height a compact plot (its caption, the axis box's two lines, the tick labels) keeps fewer than three
# rows for its data: the holder says where to see it instead of drawing empty axes.
MIN_PLOT_ROWS = 7


class PlotHolder(Vertical):
    """A placeholder until textual-plot is loaded, then a PlotWidget. Short of COMPACT_BELOW_ROWS rows it
    draws compactly: the axis labels as a caption line, margins only for the tick labels; short of MIN_PLOT_ROWS
    it draws nothing and says where to see what it would show (`elsewhere`). Under the plot, right-aligned, a
    note at its edge (what a histogram leaves out)."""

    DEFAULT_CSS = """
    PlotHolder { height: 1fr; min-height: 2; }
    PlotHolder > PlotWidget { height: 1fr; }
    PlotHolder > .plot-caption { height: auto; max-height: 2; color: $text-muted; }
    PlotHolder > .plot-edge-note { height: auto; width: 1fr; text-align: right; color: $warning; }
    """

    placeholder_text = "loading…"
    what = "the plot"  # what the holder draws, in the words of its no-room notice
    elsewhere = ""  # where the same figures are on screen when the plot has no room
    # Redrawing a plot costs milliseconds of the UI thread; at most this often, the latest data wins.
    min_redraw_interval = 0.25

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self._plot = None
        self._pace = Pace(self, self.redraw, self.min_redraw_interval)
        self._axis_caption = ""
        self._note_said = False  # the drawing under way has said its edge note

    def request_redraw(self) -> None:
        """Redraw now, or once the minimum interval has passed (never more than one pending)."""
        self._pace.request()

    def compose(self) -> ComposeResult:
        caption = Static("", classes="plot-caption")
        caption.display = False
        yield caption
        yield Static(self.placeholder_text, classes="plot-placeholder loading")
        note = Static("", classes="plot-edge-note")
        note.display = False
        yield note

    @property
    def compact(self) -> bool:
        return 0 < self.size.height < COMPACT_BELOW_ROWS

    @property
    def no_room(self) -> bool:
        return 0 < self.size.height < MIN_PLOT_ROWS

    plural = False  # `what` names more than one plot ("the latency and memory plots need ...")

    def no_room_text(self) -> str:
        """'the histogram needs 7 rows, it has 4: hide the sidebar (h) or enlarge the terminal; its percentiles are
        in the lines above', or a shorter form where that does not fit the rows it has."""
        sidebar = self.screen.query("#sidebar") if self.is_attached else []
        shown = bool(sidebar) and sidebar.first().display
        how = "hide the sidebar (h) or enlarge the terminal" if shown else "enlarge the terminal"
        need, have = ("need", "they have") if self.plural else ("needs", "it has")
        head = f"{self.what} {need} {MIN_PLOT_ROWS} rows, {have} {self.size.height}: {how}"
        forms = [f"{head}; {self.elsewhere}" if self.elsewhere else head, head,
                 f"{self.what}: no room ({'h or ' if shown else ''}a taller terminal)"]
        width, height = max(self.size.width, 1), max(self.size.height, 1)
        return next((form for form in forms if len(textwrap.wrap(form, width)) <= height), forms[-1])

    def show_edge_note(self, text: str) -> None:
        """A line under the plot at its right edge (what the plot leaves out), or none."""
        self._note_said = True
        note = self.query_one(".plot-edge-note", Static)
        set_text(note, text)
        note.display = bool(text)

    def on_resize(self) -> None:
        """A new size redraws at once (the rate limit is for data arriving): the ticks, margins and caption
        depend on it, and a plot drawn while hidden had no size at all."""
        if self._plot is not None and self.size.width > 0:
            self._pace.now()

    def show_legend(self, plot, location, entries: list[tuple[str, str]]) -> None:
        """The series' (label, colour) in a box over the plot, or, on a small plot where the box would cover
        what it names, as coloured names on the caption line (call after set_labels)."""
        if not (self.compact or self.size.width < 60):
            plot.show_legend(location)
            return
        names = Text("  ").join(Text.assemble(("■ ", colour), label) for label, colour in entries)
        caption = self.query_one(".plot-caption", Static)
        caption.display = True
        # The series first: where the line is cut at the edge, the axis words go before the names.
        caption.update(Text.assemble(names, "  · ", self._axis_caption) if self._axis_caption else names)

    def fit_xticks(self, plot, lo: float, hi: float) -> None:
        """Ticks at round values spaced so their labels never run together (textual-plot's own crowd a narrow
        plot: '20.521.0')."""
        width = self.size.width - (self._plot.margin_left if self._plot is not None else 10) - 2
        if width <= 0:
            return  # not laid out yet (a hidden tab): its resize redraws it
        ticks = nice_ticks(lo, hi, max(2, width // 8))
        if ticks:
            plot.set_xticks(ticks)

    def set_labels(self, plot, x_label: str, y_label: str) -> None:
        """Axis labels on the plot, or (compact) as one caption line above it."""
        caption = self.query_one(".plot-caption", Static)
        caption.display = self.compact
        self._axis_caption = f"{y_label} by {x_label}" if self.compact else ""
        set_text(caption, self._axis_caption)
        if self.compact:
            x_label = y_label = ""
        plot.set_xlabel(x_label)
        plot.set_ylabel(y_label)

    @property
    def has_plot(self) -> bool:
        return self._plot is not None

    def attach_plot(self) -> None:
        """Mount the PlotWidget; call once textual-plot has been imported (in the engine loader)."""
        if self._plot is not None:
            return
        # numpy and textual_plot: not on the app's first frame
        from torchperf_tui.app.widgets.timing.exit_safe_plot import ExitSafePlot

        self._plot = ExitSafePlot(allow_pan_and_zoom=False)
        self.query_one(".plot-placeholder", Static).update(self.empty_text)
        self.mount(self._plot, before=self.query_one(".plot-edge-note"))
        self._plot.display = False
        self.call_after_refresh(self.redraw)

    empty_text = "no samples yet"

    def redraw(self) -> None:
        """Clear the plot, then draw the data, or show the placeholder when there is nothing to draw."""
        if self._plot is None:
            return
        plot = self._plot
        if not plot.is_mounted:
            # A resize between mount() and the plot's compose (seen at 80x24 under load): its margins have no
            # grid to set yet, and setting them would raise. Once it has composed, draw.
            self.call_after_refresh(self.redraw)
            return
        margins = (0, 1, 6) if self.compact else (2, 3, 10)
        if (plot.margin_top, plot.margin_bottom, plot.margin_left) != margins:
            plot.margin_top, plot.margin_bottom, plot.margin_left = margins
            # textual-plot sizes its canvas to the widget only on a layout refresh: with new margins it would draw
            # into the old size (a small box above empty rows). A new size of the plot asks for one itself
            # (ExitSafePlot); a redraw at the same size and margins does not: a layout is of the whole screen.
            plot.refresh(layout=True)
        plot.clear()
        self._note_said = False
        empty = not self.has_data()
        if not empty and self.no_room:
            self._set_placeholder(True, self.no_room_text())
        else:
            self._set_placeholder(empty)
            if not empty:
                self.draw(self._plot)
        if not self._note_said:  # this drawing has no note (or none was drawn): the last one's goes
            self.show_edge_note("")

    def has_data(self) -> bool:  # pragma: no cover - overridden
        raise NotImplementedError

    def draw(self, plot) -> None:  # pragma: no cover - overridden
        raise NotImplementedError

    def _set_placeholder(self, visible: bool, text: str | None = None) -> None:
        """The placeholder text (`text`, else the empty text) when there is nothing to draw or no room to draw it,
        the plot otherwise (never empty axes)."""
        placeholder = self.query_one(".plot-placeholder", Static)
        placeholder.display = visible
        placeholder.set_class(text is None, "loading")
        if visible:
            self.query_one(".plot-caption", Static).display = False
        if visible and self._plot is not None:
            set_text(placeholder, self.empty_text if text is None else text)
        if self._plot is not None:
            self._plot.display = not visible


def outside_note(bulk) -> str:
    """The edge note of a histogram over `bulk`: what it leaves out, pointing off its right edge ('' if nothing)."""
    text = outside_bulk_text(bulk)
    return f"{text} →" if text else ""


class LatencyHistogram(PlotHolder):
    """The live histogram of one run's timed samples; under a varying shape schedule the iterations that
    met a new input shape are drawn apart (another colour, stacked on the same bins) from the repeats."""

    empty_text = "no samples yet: press r to run"
    what = "the histogram"
    elsewhere = "its percentiles are in the lines above"

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.samples: list[float] = []
        self.first_seen: list[float] = []
        self.title = ""

    def show_samples(self, samples: Sequence[float], title: str = "",
                     first_seen: Sequence[float] = (), empty: str | None = None) -> None:
        """`samples`: the repeats (all samples under a fixed shape); `first_seen`: new-shape iterations;
        `empty`: what to say while there is none (a run building or warming up is not "press r")."""
        self.empty_text = empty or type(self).empty_text
        self.samples = list(samples)
        self.first_seen = list(first_seen)
        self.title = title
        self.request_redraw()

    def has_data(self) -> bool:
        return bool(self.samples or self.first_seen)

    def draw(self, plot) -> None:
        from textual_plot import HiResMode, LegendLocation

        palette = theme_palette(self.app)
        everything = self.samples + self.first_seen
        bulk = bulk_range(everything)  # the bins span the bulk; the samples far outside are counted at the edge
        lo, hi = bulk.low, bulk.high
        bins = bin_count(len(everything) - bulk.outside)
        centres, counts, width = histogram_bins(self.samples, bins, lo, hi)
        if self.first_seen:
            # Stacked: the first-seen bars are drawn first at full height, the repeats over them.
            new_centres, new_counts, width = histogram_bins(self.first_seen, bins, lo, hi)
            total = [a + b for a, b in zip(counts, new_counts)] if counts else new_counts
            centres = centres or new_centres  # no repeats yet: the first-seen bins are the bins
            legend = [(f"new shape ({len(self.first_seen)})", palette[1 % len(palette)])]
            if counts:
                legend.append((f"repeat ({len(self.samples)})", palette[0]))
            for label, colour in legend:
                plot.bar(centres, total if label.startswith("new") else counts, width=width, bar_style=colour,
                         hires_mode=HiResMode.QUADRANT, label=label)
            top = max(total)
        else:
            plot.bar(centres, counts, width=width, bar_style=palette[0], hires_mode=HiResMode.QUADRANT)
            top = max(counts)
        self.set_labels(plot, f"latency, ms{('  ' + self.title) if self.title else ''}", "count")
        self.fit_xticks(plot, centres[0] - width / 2, centres[-1] + width / 2)
        if self.first_seen:
            self.show_legend(plot, LegendLocation.TOPRIGHT, legend)
        plot.set_ylimits(0, top * 1.1)
        self.show_edge_note(outside_note(bulk))


class LatencyOverlay(PlotHolder):
    """Histograms of several runs on shared bins, one colour each, with a legend."""

    empty_text = "finish two runs to overlay them"
    what = "the overlay"
    elsewhere = "the table above has each run's median and p99"

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.series: list[tuple[str, list[float]]] = []

    def show_runs(self, series: list[tuple[str, list[float]]], empty: str | None = None) -> None:
        """`empty`: what to say while no series has a sample (an A/B before its first block)."""
        self.empty_text = empty or type(self).empty_text
        self.series = [(label, list(samples)) for label, samples in series if samples]
        self.request_redraw()

    def has_data(self) -> bool:
        return bool(self.series)

    def draw(self, plot) -> None:
        from textual_plot import HiResMode, LegendLocation

        # Shared bins over the runs' bulks, so a few stalls do not squash the rest; those are counted at the edge.
        bulk = runs_bulk_range([samples for _, samples in self.series])
        lo, hi = bulk.low, bulk.high
        bins = bin_count((sum(len(samples) for _, samples in self.series) - bulk.outside) // len(self.series))
        palette = theme_palette(self.app)
        top = 0.0
        legend = []
        for i, (label, samples) in enumerate(self.series):
            centres, counts, _ = histogram_bins(samples, bins, lo, hi)
            share = [100.0 * c / len(samples) for c in counts]
            top = max(top, max(share))
            legend.append((label, palette[i % len(palette)]))
            plot.plot(centres, share, line_style=legend[-1][1], hires_mode=HiResMode.BRAILLE, label=label)
        self.set_labels(plot, "latency, ms", "% of run")
        self.fit_xticks(plot, lo, hi)
        plot.set_ylimits(0, top * 1.1)
        self.show_legend(plot, LegendLocation.TOPRIGHT, legend)
        self.show_edge_note(outside_note(bulk))
