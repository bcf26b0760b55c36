"""Sweep pane: a token model's latency, tokens/s and peak memory at sequence lengths doubling from 128 to 4096 (cut at
its maximum positions) under the current flags (key w), or under the flags before the last flip (A) and the current
ones (B) measured interleaved (key W): a row per length as the sweep goes, then what stopped it, and two plots,
p50 latency and peak memory against length, one line per arm (math's quadratic memory against flash's)."""

from __future__ import annotations

import math

from textual import on
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.markup import escape
from textual.reactive import reactive
from textual.widgets import Button, DataTable, Static

from torchperf_tui.app.messages import JobEvent
from torchperf_tui.app.pane_jobs import PaneJobs
from torchperf_tui.app.widgets.fitted_table import FittedTable
from torchperf_tui.app.widgets.log2_axis import Log2Axis
from torchperf_tui.app.widgets.timing.histogram import MIN_PLOT_ROWS, PlotHolder, theme_palette
from torchperf_tui.core.formatting import format_bytes, format_ms, number_text
from torchperf_tui.measure.protocol import JobDone, Progress
from torchperf_tui.engine.measurements.ab_arms import ArmSpec, same_arms_refusal
from torchperf_tui.engine.measurements.sweep import parse_seq_lens
from torchperf_tui.wording import model_label
from torchperf_tui.wording.conditions import CONDITION_MARK, point_mark, table_marks
from torchperf_tui.wording.sweep import sweep_marks_text, sweep_summary

SWEEP_LENGTHS = "128-4096"  # the app's lengths (the CLI's default): cut at the model's maximum, within the budget
MiB = 1024**2


# The figures a user reads first lead, so latency, memory and tokens/s stay in sight at 80 columns beside the sidebar;
# an arm's column only in an A/B (a lone sweep's would say "–" on every row); p90 where there is room (P90_WHERE).
COLUMNS = (("length", "length"), ("arm", "arm"), ("p50", "p50"), ("peak", "peak"), ("rate", "tokens/s"),
           ("p90", "p90"))
P90_WHERE = "p90: h hides the sidebar"


def columns_for(ab: bool, p90: bool = True) -> tuple[tuple[str, str], ...]:
    return tuple(column for column in COLUMNS if (ab or column[0] != "arm") and (p90 or column[0] != "p90"))


def point_cells(point, ab: bool = False, p90: bool = True) -> tuple[str, ...]:
    """(length, [arm,] p50, peak, tokens/s[, p90]) of one SweepPoint; one that did not fit says so (why: in the
    summary, which says what stopped the sweep). A point whose window was disturbed has its length marked '128 !',
    as Throughput marks a try: the line under the table says what each mark is."""
    arm = (point.arm or "–",) if ab else ()
    last = (format_ms(point.p90_ms),) if p90 else ()
    if not point.fits:
        return (str(point.length), *arm, "does not fit", "", "", *("",) * len(last))
    length = f"{point.length} {CONDITION_MARK}" if point_mark(point) else str(point.length)
    return (length, *arm, format_ms(point.median_ms), format_bytes(point.peak_bytes),
            number_text(point.tokens_per_s, ",.0f"), *last)


class SweepPlot(PlotHolder):
    """One figure (p50 latency or peak memory) against sequence length, a line per arm, with a legend in an A/B."""

    elsewhere = "the table above has every length"

    def __init__(self, metric: str, **kwargs) -> None:
        super().__init__(**kwargs)
        self.metric = metric  # "latency" or "memory"
        self.what = f"the {metric} plot"
        self.empty_text = "no lengths yet: press w to sweep (W: the flags before the last flip against now)"
        self.series: dict[str, list[tuple[int, float]]] = {}
        self.labels: dict[str, str] = {}

    def speak_for_both(self, both: bool) -> None:
        """Name both plots in the no-room note (the memory plot is hidden meanwhile), or this one alone."""
        what = "the latency and memory plots" if both else f"the {self.metric} plot"
        if (what, both) != (self.what, self.plural):
            self.what, self.plural = what, both
            self.request_redraw()

    def show(self, series: dict[str, list[tuple[int, float]]], labels: dict[str, str]) -> None:
        self.series = {arm: sorted(points) for arm, points in series.items() if points}
        self.labels = labels
        self.request_redraw()

    def has_data(self) -> bool:
        return bool(self.series)

    def draw(self, plot) -> None:
        from textual_plot import HiResMode, LegendLocation

        palette = theme_palette(self.app)
        legend = []
        lengths = [n for points in self.series.values() for n, _ in points]
        top = max(v for points in self.series.values() for _, v in points)
        for i, (arm, points) in enumerate(sorted(self.series.items())):
            colour = palette[i % len(palette)]
            xs, ys = [math.log2(n) for n, _ in points], [v for _, v in points]
            label = self.labels.get(arm, arm) if len(self.series) > 1 else None
            plot.plot(xs, ys, line_style=colour, hires_mode=HiResMode.BRAILLE, label=label)
            plot.scatter(xs, ys, marker_style=colour)
            if label:
                legend.append((label, colour))
        y_label = "p50 latency, ms" if self.metric == "latency" else "peak memory, MiB"
        self.set_labels(plot, "sequence length", y_label)
        width = self.size.width - (self._plot.margin_left if self._plot is not None else 10) - 2
        axis = Log2Axis(lengths, max(2, width // 7))
        plot.set_x_formatter(axis.formatter)
        plot.set_xlimits(*axis.limits())
        plot.set_xticks(axis.ticks)
        plot.set_ylimits(0, top * 1.1 if top > 0 else 1)
        if legend:
            self.show_legend(plot, LegendLocation.TOPLEFT, legend)


class SweepPlots(Horizontal):
    """The two plots side by side; short of the rows a plot needs, the memory plot steps aside and the latency plot
    says it for both, in one line across the pane (two notes side by side would run into each other)."""

    def on_resize(self) -> None:
        latency = self.query_one("#sweep-latency", SweepPlot)
        memory = self.query_one("#sweep-memory", SweepPlot)
        cramped = 0 < self.size.height < MIN_PLOT_ROWS
        latency.speak_for_both(cramped)
        memory.display = not cramped


class SweepPane(Vertical):
    """Owns the sweep (keys w and W): a row per length and arm as it streams, then the result and its plots."""

    status: reactive[str] = reactive("", init=False, always_update=True)

    DEFAULT_CSS = """
    SweepPane { height: 1fr; }
    SweepPane > Static { height: auto; }
    SweepPane > DataTable { height: auto; max-height: 7; }
    SweepPane > Horizontal { height: 1fr; }
    SweepPlots > SweepPlot { width: 1fr; }
    """

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.jobs = PaneJobs(self)
        self.points: list = []
        self.arm_labels: dict[str, str] = {}
        self.result = None  # the last sweep's SweepResult; `error` its one line when it failed
        self.error: str | None = None
        self._ab = False  # the table's columns are an A/B's
        self._p90 = True  # the table has room for p90
        self._summary: list[str] = []  # the result's lines under the table

    def compose(self) -> ComposeResult:
        with Horizontal(classes="pane-actions"):
            yield Button("Sweep lengths (w)", id="sweep-start", compact=True, action="app.pane('sweep', 'start')")
            yield Static("pick a token model, then w: latency and memory at lengths 128 to 4096 (W: the flags "
                         "before the last flip against the current ones)", id="sweep-status")
        yield FittedTable(id="sweep-table", cursor_type="row", zebra_stripes=True)
        yield Static("", id="sweep-summary")
        with SweepPlots(id="sweep-plots"):
            yield SweepPlot("latency", id="sweep-latency")
            yield SweepPlot("memory", id="sweep-memory")

    def on_mount(self) -> None:
        if not self.query(DataTable):
            return  # the app is closing as the pane mounts
        self._set_columns(ab=False)

    def _set_columns(self, ab: bool) -> None:
        """The table emptied, with the columns of a lone sweep or an A/B's."""
        self._ab = ab
        self._fill()

    def _fill(self) -> None:
        """The table's columns and a row per point; p90 only where every column fits the table's width."""
        table = self.query_one(FittedTable)
        every = table.natural_width(columns_for(self._ab), [point_cells(point, self._ab) for point in self.points])
        self._p90 = every <= table.columns_width(len(self.points), laid_out=self.scrollable_content_region.width)
        table.fill(columns_for(self._ab, self._p90), [point_cells(point, self._ab, self._p90) for point in self.points])
        if table.row_count:
            table.move_cursor(row=table.row_count - 1)
        self._say_summary()

    @on(FittedTable.WidthChanged)
    def _refit(self) -> None:
        self._fill()

    def start(self) -> None:
        """Sweep under the current flags (replacing a sweep or any measurement in flight)."""
        self._start(None)

    def start_ab(self) -> None:
        """Sweep the flags before the last flip (A) against the current ones (B), interleaved at each length."""
        flags = self.screen.pane("flags")
        arms = flags.arms() if flags.flags is not None else None
        if arms is None:
            self.app.notify(same_arms_refusal("flip a flag first: W sweeps the flags before the flip against the "
                                              "current ones"), severity="warning", timeout=6)
            return
        self._start(arms)

    def _start(self, flag_arms) -> None:
        selection = self.screen.ready_selection("sweep", module="sweep")
        if selection is None:
            return
        arms = None
        self.arm_labels = {"": self.app.session.flags_text(selection.flags)}
        if flag_arms is not None:
            a, b = flag_arms  # each arm said beside the other: a flag they differ in, by both
            arms = tuple(ArmSpec(flags=f, text=self.app.session.flags_text(f, beside=other))
                         for f, other in ((a, b), (b, a)))
            self.arm_labels = {"A": f"A ({arms[0].text})", "B": f"B ({arms[1].text})"}
        self.screen.show_tab("sweep")
        self.result, self.error = None, None
        self.points, self._summary = [], []
        self._set_columns(ab=arms is not None)
        self._replot()
        under = "A and B interleaved" if arms else self.arm_labels[""]
        self.status = (f"[b]{selection.model}[/] on {self.app.session.resolved_device()} · sweeping lengths "
                       f"{SWEEP_LENGTHS} (doubling, cut at the model's maximum) under {escape(under)}…")
        cfg = self.jobs.config(selection, self._failed, slot="sweep")
        if cfg is None:
            return
        self.jobs.start("sweep", {"cfg": cfg, "seq_lens": parse_seq_lens(SWEEP_LENGTHS), "arms": arms},
                        f"sweeping the sequence length of {selection.model}")

    @on(JobEvent)
    def _job_event(self, message: JobEvent) -> None:
        event = self.jobs.answer(message, self._failed)
        if isinstance(event, Progress) and event.what == "sweep_point":
            self.add_point(event.data)
        elif isinstance(event, JobDone):
            self.show_result(event.result)
            if getattr(self.app, "mlflow", None) is not None:  # --mlflow (app/mlflow_link.py): in a worker thread
                self.app.mlflow.log_result(self.app, "sweep", event.result, event.extra)

    def _failed(self, error: str) -> None:
        self.error = error
        self.status = f"[b $error]error:[/] {escape(error)}"
        self.app.notify(error, title="sweep failed", severity="error", timeout=8)

    def model_chosen(self, model: str) -> None:
        if self.status == "":
            self.status = f"[b]{model}[/] · w: sweep the sequence length (a token model)"

    def watch_status(self, text: str) -> None:
        self.query_one("#sweep-status", Static).update(text)

    def add_point(self, point) -> None:
        self.points.append(point)
        self._fill()  # a longer length's figures can be wider: p90 goes where they no longer fit
        self._replot()

    def show_result(self, result) -> None:
        self.result = result
        # A point's event lost to a replaced job, or a table laid out for the other kind: the result's own rows.
        if len(self.points) != len(result.points) or self._ab != result.ab:
            self.points = list(result.points)
            self._set_columns(result.ab)
        self.arm_labels = {name: (f"{name} ({text})" if name else text) for name, text in result.arms}
        lines = [f"[b]{escape(sweep_summary(result))}[/]"] + [escape(note) for note in result.notes
                                                               if not note.startswith("CPU memory cap")]
        lines += [f"[b $warning]torch state:[/] {escape(note)}" for note in result.state_notes]
        # per length, as a run's; whole in the tooltip
        marks = table_marks(sweep_marks_text(result, compact=True), [point for point in result.points if point.fits])
        lines += [f"[$warning]{escape(marks)}[/]"] if marks else []
        self._summary = lines
        self._say_summary()
        self.query_one("#sweep-summary", Static).tooltip = sweep_marks_text(result) or None
        span = f"{result.lengths[0]}-{result.lengths[-1]}"
        self.status = (f"[b]{escape(model_label(result.model, result.model_args))}[/] on {result.device}, "
                       f"{result.dtype}, batch {result.batch}, lengths {span} · "
                       f"{'cancelled' if result.cancelled else 'done'}")
        self._replot()

    def _say_summary(self) -> None:
        """The result's lines, then where p90 is while the table has no room for it."""
        where = [f"[dim]{P90_WHERE}[/]"] if self.points and not self._p90 else []
        self.query_one("#sweep-summary", Static).update("\n".join(self._summary + where))

    def _replot(self) -> None:
        latency: dict[str, list] = {}
        memory: dict[str, list] = {}
        for p in self.points:
            if p.fits and p.median_ms is not None:
                latency.setdefault(p.arm, []).append((p.length, p.median_ms))
            if p.fits and p.peak_bytes is not None:
                memory.setdefault(p.arm, []).append((p.length, p.peak_bytes / MiB))
        self.query_one("#sweep-latency", SweepPlot).show(latency, self.arm_labels)
        self.query_one("#sweep-memory", SweepPlot).show(memory, self.arm_labels)
