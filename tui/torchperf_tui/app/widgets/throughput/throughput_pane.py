"""Throughput pane: the batch search as it goes (one row per batch tried), then the best samples/s and its
batch, the largest batch that fits as far as the search went, the rule that stopped it and the time spent. Or, with a
latency budget typed in its field (`p99=50ms` ⏎), the largest batch within it: a row per batch timed and the batch
chosen. Either way the plot is the frontier: each batch's latency against its rate (the median of a try's passes
against samples/s; under a budget the quantile's against items/s, the budget drawn across), the chosen batch marked."""

from __future__ import annotations

import time

from textual import on
from textual.app import ComposeResult
from textual.reactive import reactive
from textual.containers import Horizontal, Vertical
from textual.markup import escape
from textual.widgets import Button, DataTable, Input, Static

from torchperf_tui.app.pane_jobs import PaneJobs
from torchperf_tui.app.messages import JobEvent
from torchperf_tui.measure.protocol import JobDone, Progress

from torchperf_tui.core.errors import TorchperfError
from torchperf_tui.core.formatting import format_bytes, format_ms, format_number, format_shape, is_number, number_text
from torchperf_tui.core.slo import EXAMPLE, parse_slo
from torchperf_tui.wording import bold
from torchperf_tui.wording.conditions import conditions_line_rows, disturbed_text, table_marks
from torchperf_tui.wording.throughput import (SLO_LEGEND, best_text, fits_text, frontier_cells, limit_row, slo_columns,
                                             slo_point_cells, slo_rows, stopped_by_row)
from torchperf_tui.app.widgets.timing.histogram import PlotHolder, theme_palette
from torchperf_tui.app.widgets.timing.run_lines import conditions_markup
from torchperf_tui.core.marks import disturbance_marks


# The figures first, so they are in sight at 80 columns beside the sidebar; how each try went after them.
COLUMNS = (("batch", "batch"), ("rate", "samples/s"), ("latency", "latency"), ("fits", "fits"), ("phase", "phase"),
           ("took", "took"))


def slo_summary(result) -> str:
    """Under a latency budget: the batch chosen, what ended the search and the time spent (slo_rows' words), each
    batch's marks."""
    lines = [f"{escape(label)}: {escape(str(value))}" for label, value, *_ in slo_rows(result)]
    return "\n".join(lines + [SLO_LEGEND])


def try_cells(t) -> tuple[str, str, str, str, str, str]:
    """(batch, samples/s, latency, fits or not, phase, time the try took) of one BatchTry."""
    return (str(t.batch), format_number(t.samples_per_s, digits=1) if t.samples_per_s is not None else "–",
            format_ms(t.latency_ms) if t.latency_ms is not None else "–", fits_text(t, compact=True), t.phase,
            number_text(t.seconds, ".1f", " s", na="–"))


def throughput_summary(result) -> str:
    """The best samples/s and its batch; the largest batch that fits (or how far the search went); the
    rule that stopped the search; why each try that did not fit did not; the time spent; the engine's notes; the
    marks of a busy host per try (their heads, after the '!' of the table's 'yes !' that says which)."""
    latency = format_ms(result.latency_ms) if result.latency_ms is not None else "–"
    if result.samples_per_s is not None:
        head = f"best {best_text(result, bold)} · latency {latency} per batch"
    else:
        head = "[b]cancelled[/] before a measurement" if result.cancelled else "no measurement"
    head += f" · {result.time_text()}"
    cap = result.memory_cap_bytes
    if is_number(cap):
        head += f" · CPU cap {format_bytes(cap)}"
    limit, stopped = limit_row(result), stopped_by_row(result, bold, escape)
    lines = [head, f"{limit[0]}: {limit[1]}", f"{stopped[0]} {stopped[1]}"]
    # why a try did not fit (the table says only that it did not): each reason once, at the first batch it stopped
    failures: dict = {}
    for t in result.tries:
        if not t.fits:
            failures.setdefault(t.reason, t)
    lines += [escape(f"batch {t.batch} {fits_text(t)}") for t in failures.values()]
    # Notes can quote an exception's text: escaped, so a "[" in it is not read as markup.
    lines += [escape(n) for n in result.notes if not n.startswith("CPU memory cap")]
    # a GPU: its clocks, energy per sample and throttling over the measurement
    gpu = conditions_markup(conditions_line_rows(result, result.best_batch, compact=True, where="at batch"))
    marks = table_marks(disturbed_text(disturbance_marks(result), compact=True), [t for t in result.tries if t.fits])
    return "\n".join(lines + ([gpu] if gpu else []) + ([f"[$warning]{escape(marks)}[/]"] if marks else []))


def search_progress(model: str, started: float, budget_s: float, last) -> str:
    """While the search runs: the time spent against its budget, and what the next try may take (a doubled
    batch takes about twice the last try; the budget bounds the whole search)."""
    elapsed = time.monotonic() - started
    left = max(budget_s - elapsed, 0.0)
    text = f"[b]{model}[/] · searching: {elapsed:.0f} s of the {budget_s:g} s budget, at most {left:.0f} s left"
    if last.phase == "grow" and last.fits and last.seconds is not None:
        text += f" · next try batch {2 * last.batch}, about {min(2 * last.seconds, left):.0f} s"
    return text


class ThroughputPlot(PlotHolder):
    """The frontier between latency and throughput: each batch's latency against its rate, the batch chosen marked
    (the best samples/s; under a latency budget the largest within it, the budget drawn across)."""

    empty_text = "no batches yet: press t to search"
    what = "the plot of latency against throughput"
    elsewhere = "the table above has every batch"

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        # (rate, latency ms, batch) by batch; the budget (quantile name, ms); the chosen batch
        self.frontier: list[tuple[float, float, int]] = []
        self.budget: tuple[str, float] | None = None
        self.chosen: int | None = None

    @property
    def latency(self) -> str:
        """What the latency is: the budget's quantile, or the median of a try's passes."""
        return self.budget[0] if self.budget is not None else "median"

    @property
    def rate(self) -> str:
        """What the rate is: items/s under a budget, else samples/s."""
        return "items/s" if self.budget is not None else "samples/s"

    def show_frontier(self, points: list[tuple[float, float, int]], budget: tuple[str, float] | None = None,
                      chosen: int | None = None) -> None:
        """`points` (rate, latency ms, batch); under a latency `budget` (quantile name, ms) the latency is that
        quantile's and the rate items/s."""
        self.frontier, self.budget, self.chosen = sorted(points, key=lambda p: p[2]), budget, chosen
        self.request_redraw()

    def has_data(self) -> bool:
        return bool(self.frontier)

    def draw(self, plot) -> None:
        from textual_plot import HiResMode  # textual-plot: loaded with the plot, after the first frame

        palette = theme_palette(self.app)
        xs = [x for x, _, _ in self.frontier]
        ys = [y for _, y, _ in self.frontier]
        right = max(xs) * 1.1 if max(xs) > 0 else 1.0
        top = max(ys + ([self.budget[1]] if self.budget is not None else [])) * 1.15 or 1.0
        plot.plot(xs, ys, line_style=palette[0], hires_mode=HiResMode.BRAILLE)
        plot.scatter(xs, ys, marker_style=palette[1 % len(palette)])
        if self.budget is not None:
            plot.plot([0.0, right], [self.budget[1], self.budget[1]], line_style="red", hires_mode=HiResMode.BRAILLE)
        chosen = [(x, y) for x, y, batch in self.frontier if batch == self.chosen]
        if chosen:
            plot.scatter([chosen[0][0]], [chosen[0][1]], marker="◆", marker_style=palette[2 % len(palette)])
        self.set_labels(plot, self.rate, f"{self.latency} ms")
        plot.set_xlimits(0, right)
        self.fit_xticks(plot, 0, right)
        plot.set_ylimits(0, top)


class ThroughputPane(Vertical):
    """Owns the batch search (key t): one row per batch tried as it streams, then the result."""

    status: reactive[str] = reactive("", init=False, always_update=True)  # the line beside the pane's button

    DEFAULT_CSS = """
    ThroughputPane { height: 1fr; }
    ThroughputPane > Static { height: auto; }
    ThroughputPane > DataTable { height: auto; max-height: 9; }
    ThroughputPane #throughput-slo { width: 16; }
    """

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.jobs = PaneJobs(self)
        self._searching: tuple | None = None  # (model, when the search started, its time budget) while it runs
        self._slo = None  # the latency budget of the search shown (core/slo.Slo), None for the samples/s search

    def compose(self) -> ComposeResult:
        with Horizontal(classes="pane-actions"):
            yield Button("Find max batch (t)", id="throughput-start", compact=True,
                         action="app.pane('throughput', 'start')")
            yield Input(placeholder=f"SLO {EXAMPLE} ⏎", id="throughput-slo", compact=True,
                        tooltip="a latency budget at a quantile (p99=50ms, p90=0.5s) and ⏎: the largest batch within "
                                "it, each batch timed with the passes its quantile needs, and the frontier")
        # below the row, the whole width: the button and the budget's field leave a narrow pane no room beside them
        yield Static("pick a model, then t: double the batch until samples/s stops improving or it does not fit, "
                     "within a time budget", id="throughput-status")
        yield DataTable(id="throughput-table", cursor_type="row", zebra_stripes=True)
        yield Static("", id="throughput-summary")
        yield ThroughputPlot(id="throughput-plot")

    def on_mount(self) -> None:
        if not self.query(DataTable):
            return  # the app is closing as the pane mounts: its children are already gone
        self._columns(None)

    def _columns(self, slo) -> None:
        """The table's columns for the samples/s search, or (`slo`) for the search under a latency budget."""
        table = self.query_one(DataTable)
        table.clear(columns=True)
        if slo is None:
            for key, label in COLUMNS:
                table.add_column(label, key=key)
        else:
            for key, label in slo_columns(slo):
                table.add_column(label, key=key)

    def focus_slo(self) -> None:
        """T: the Throughput tab, the cursor in the latency budget's field (⏎ there starts the search)."""
        self.screen.show_tab("throughput")
        self.query_one("#throughput-slo", Input).focus()

    @on(Input.Submitted, "#throughput-slo")
    def _slo_typed(self, event: Input.Submitted) -> None:
        event.stop()
        text = event.value.strip()
        if not text:
            self.start()
            return
        try:
            slo = parse_slo(text, name="latency budget")
        except TorchperfError as exc:
            self.show_error(escape(str(exc)))
            return
        self.start(slo)

    def start(self, slo=None) -> None:
        """Search the largest batch that fits for the chosen model and settings (replacing a search or any
        measurement in flight), or (`slo`, a core/slo.Slo) the largest within that latency budget; the previous
        search's rows and plot are cleared."""
        selection = self.screen.ready_selection("throughput", module="throughput")
        if selection is None:
            return
        session = self.app.session
        self.screen.show_tab("throughput")
        self._slo = slo
        self._columns(slo)
        self.query_one("#throughput-summary", Static).update("")
        self.query_one(ThroughputPlot).show_frontier([])
        what = ("doubling the batch until samples/s stops improving, it does not fit, or the time budget runs out"
                if slo is None else f"the largest batch with its {slo.text()}, each batch timed with the passes "
                                    f"its {slo.name} needs")
        self.status = (f"[b]{selection.model}[/] on {session.resolved_device()} · {selection.step_text()} · "
                         f"{session.flags_text(selection.flags)} · searching: {what}…")
        cfg = self.jobs.config(selection, self._failed, slot="throughput")
        if cfg is None:
            return
        options = {} if session.max_batch is None else {"max_batch": session.max_batch}
        if slo is None:
            self.jobs.start("throughput", {"cfg": cfg, "options": options},
                            f"searching the largest batch of {selection.model}")
        else:
            # one slot for both searches: the one typed replaces the other, whose late events are then dropped
            self.jobs.start("slo", {"cfg": cfg, "slo": slo, "options": options},
                            f"searching the largest batch of {selection.model} within {slo.text()}",
                            slot="throughput")
        from torchperf_tui.engine.measurements.throughput import DEFAULT_TIME_BUDGET_S  # loaded by the session's warm-up

        self._searching = (selection.model, time.monotonic(), DEFAULT_TIME_BUDGET_S)

    @on(JobEvent)
    def _job_event(self, message: JobEvent) -> None:
        event = self.jobs.answer(message, self._failed)
        if not self.jobs.busy("throughput"):
            self._searching = None  # the search ended: done, failed, or cancelled before it began
        if isinstance(event, Progress) and event.what == "slo_point":
            self.add_slo_point(event.data)
        elif isinstance(event, Progress):
            self.add_try(event.data)
        elif isinstance(event, JobDone):
            result = event.result
            self.show_result(result)
            self.status = (f"[b]{result.model}[/] {format_shape(result.sample_shape)} per sample, "
                             f"{result.dtype} on {result.device} · {result.step} · "
                             f"{'cancelled' if result.cancelled else 'done'}")
            if hasattr(result, "slo"):
                return  # the SLO's result is its own: not a samples/s search's headline, nor logged as one
            if not result.cancelled:
                self.app.notify(f"{result.model}: {result.headline()}", title="throughput", timeout=4)
            if getattr(self.app, "mlflow", None) is not None:  # --mlflow (app/mlflow_link.py): in a worker thread
                self.app.mlflow.log_result(self.app, "throughput", result, event.extra)

    def _failed(self, error: str) -> None:
        self._searching = None
        self.show_error(error)
        self.app.notify(error, title="throughput failed", severity="error", timeout=8)

    def model_chosen(self, model: str) -> None:
        """The status line names the chosen model until this pane's first job (it said "pick a model")."""
        if self.status == "":
            self.status = (f"[b]{model}[/] · t: search the largest batch that fits, doubling until samples/s stops "
                           "improving or it does not fit, within a time budget")

    def watch_status(self, text: str) -> None:
        self.query_one("#throughput-status", Static).update(text)

    def show_error(self, text: str) -> None:
        self.status = f"[b $error]error:[/] {text}"

    def add_try(self, t) -> None:
        table = self.query_one(DataTable)
        table.add_row(*try_cells(t))
        if self._searching is not None:
            self.status = search_progress(*self._searching, t)
        table.move_cursor(row=table.row_count - 1)
        plot = self.query_one(ThroughputPlot)
        if t.fits and t.samples_per_s is not None and t.latency_ms is not None and t.phase != "measure":
            plot.show_frontier([p for p in plot.frontier if p[2] != t.batch] + [(t.samples_per_s, t.latency_ms,
                                                                                  t.batch)])

    def add_slo_point(self, point) -> None:
        """A batch timed under the latency budget: its row, and the frontier so far."""
        table = self.query_one(DataTable)
        q = point.quantile
        table.add_row(*slo_point_cells(point, self._slo))
        table.move_cursor(row=table.row_count - 1)
        plot = self.query_one(ThroughputPlot)
        if q is not None and point.items_per_s:
            kept = [p for p in plot.frontier if p[2] != point.batch]
            plot.show_frontier(kept + [(point.items_per_s, q.value_ms, point.batch)],
                               (self._slo.name, self._slo.budget_ms))

    def show_result(self, result) -> None:
        if hasattr(result, "slo"):  # a search under a latency budget (SloResult)
            self._show_slo(result)
            return
        self.query_one("#throughput-summary", Static).update(throughput_summary(result))
        self.query_one(ThroughputPlot).show_frontier(
            [(p["items_per_s"], p["p50_ms"], p["batch"]) for p in result.frontier],
            chosen=result.best_batch or None)

    def _show_slo(self, result) -> None:
        """The search under a latency budget: the table as the frontier (by batch), the batch chosen, the plot."""
        table = self.query_one(DataTable)
        table.clear()
        for cells in frontier_cells(result):
            table.add_row(*cells)
        self.query_one("#throughput-summary", Static).update(slo_summary(result))
        self.query_one(ThroughputPlot).show_frontier(
            [(p.items_per_s, p.quantile.value_ms, p.batch) for p in result.frontier if p.items_per_s],
            (result.slo.name, result.slo.budget_ms), result.chosen.batch if result.chosen is not None else None)
