"""Timing pane: the chosen model's summary, progress through warm-up and timed iterations, live stats
and the live latency histogram of the current run. It owns the timing run (key r), its follow-up steps
(saved to the history, placed on the roofline), the determinism check (key d) and the timing modes side by
side (key M); the lines under the run are run_lines.py's, the roofline, determinism and modes lines widgets
of their own beside it."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from textual import on
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.message import Message
from textual.reactive import reactive
from textual.widgets import ProgressBar, Static

from torchperf_tui.core.formatting import format_shape
from torchperf_tui.app.pane_jobs import PaneJobs
from torchperf_tui.app.messages import JobEvent, RunsChanged
from torchperf_tui.app.runs import LiveRun, app_marks, input_text, save_run
from torchperf_tui.app.widgets.timing.determinism_note import DeterminismNote
from torchperf_tui.app.widgets.timing.generation_view import GenerationView
from torchperf_tui.app.widgets.timing.histogram import LatencyHistogram
from torchperf_tui.app.widgets.timing.modes_lines import ModesLines
from torchperf_tui.app.widgets.timing.baseline_line import BaselineLine
from torchperf_tui.app.widgets.timing.roofline_line import RooflineLine
from torchperf_tui.app.widgets.timing.run_lines import (WAITING_TEXT, bar_progress, finished_text, histogram_due,
                                                        redraw_due, stats_and_tooltip, status_line)
from torchperf_tui.measure.protocol import JobDone, JobFailed, Progress, Samples
from torchperf_tui.engine.workloads.inputs import dtype_note
from torchperf_tui.core.stats import compute_stats
from torchperf_tui.core.marks import disturbance_marks


def update_live(line: Static, text: str, settled: bool) -> None:
    """Show `text` on a line of the run. While the run is live the screen is laid out again only when the text
    needs another number of rows than the line has (a relayout of the whole screen at each live update was about
    a quarter of what the update cost: bench/results/tui_fidelity.txt)."""
    line.update(text, layout=settled or text.count("\n") + 1 != line.size.height)


COMPACT_BELOW_ROWS = 30  # the pane's height under which its lines are compact

class TimingPane(Vertical):
    """The current (or last) run. Jobs: "time" (the run), "roofline" (of the finished run), "determinism"."""

    @dataclass
    class RooflineReady(Message):
        """The current run's place on the roofline (a RooflineResult): Layers shows it per layer, Device the
        full reasons behind each n/a (`notes`) for run `label`; `run` is the TimingResult it places (Layers times
        each layer of it on request)."""

        result: Any
        label: str = ""
        notes: str = ""
        run: Any = None

    model_line: reactive[str] = reactive("loading…", init=False)  # the chosen model and its analysis

    DEFAULT_CSS = """
    TimingPane { height: 1fr; }
    TimingPane > Static { height: auto; }
    TimingPane.-compact #model-summary, TimingPane.-compact #run-status {
        text-wrap: nowrap;
        text-overflow: ellipsis;
    }
    """

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.jobs = PaneJobs(self)
        self.record: LiveRun | None = None  # the current run
        self._job_runs: dict[int, LiveRun] = {}  # job id -> its run, until its final answer
        self.last_determinism = None  # the latest DeterminismReport
        self.determinism_note = DeterminismNote()
        self.modes_lines = ModesLines()
        self.roofline_line = RooflineLine()

    @property
    def last_modes(self):
        """The latest ModesResult (its lines keep it), None once another model is chosen."""
        return self.modes_lines.result

    def compose(self) -> ComposeResult:
        yield Static("loading…", id="model-summary", classes="loading")
        yield Static("", id="run-status")
        bar = ProgressBar(total=1, show_eta=False, id="run-progress")
        bar.display = False  # until the first run
        yield bar
        yield Static("", id="run-stats")
        yield from (self.roofline_line, BaselineLine())  # the second: History's baseline (b), each run against it
        yield self.determinism_note
        yield self.modes_lines
        yield LatencyHistogram(id="latency-histogram")
        yield GenerationView()  # key g: a causal LM's generation, timed per token (a section of its own)

    def on_resize(self, event) -> None:
        """Short of COMPACT_BELOW_ROWS rows (80x24 leaves 20) the lines above the histogram are compact so it
        keeps its bars: the model's and the run's one row each (cut at the edge: the full text is in Layers and
        the notifications), the results in their short forms, wrapped."""
        compact = event.size.height < COMPACT_BELOW_ROWS
        if compact != self.has_class("-compact"):
            self.set_class(compact, "-compact")
            if self.record is not None:
                self._show(self.record, histogram=False)
            self.modes_lines.compact(compact)
            self.query_one(GenerationView).compact()

    # -- the timing run ------------------------------------------------------------------------------
    def start_run(self) -> None:
        """Time the chosen model under the current flags (a run or any measurement in flight is cancelled)."""
        selection = self.screen.ready_selection("timing")
        if selection is None:
            return
        session = self.app.session
        if self.record is not None and not self.record.finished:
            # Replaced: its job is cancelled below and its last answer dropped, so it ends here.
            self.record.status = "cancelled"
        record = LiveRun.of(session, selection, self.screen.default_shape())
        session.runs.add(record)
        session.run_memory.clear()
        self.record = record
        self.jobs.cancel("roofline", enforce=False)  # the last run's: it would land under this one
        self.roofline_line.say("")
        self._show(record)
        self.post_message(RunsChanged())
        cfg = self.jobs.config(selection, lambda error: self._failed(record, error), slot="time")
        if cfg is None:
            return
        record.batch = cfg.batch or 1
        note = dtype_note(selection.dtype, session.device_kind())
        if note:
            self.app.notify(note, title="dtype", severity="warning", timeout=8)
        what = f"timing {selection.model} at {selection.input_text(self.screen.default_shape())}"
        self._job_runs[self.jobs.start("time", {"cfg": cfg}, what)] = record

    def cancel_run(self) -> None:
        """The run shows it is being cancelled until its last answer comes."""
        if self.record is not None and not self.record.finished:
            self.record.status = "cancelling"
            self._show(self.record, histogram=False)

    @on(JobEvent)
    def _job_event(self, message: JobEvent) -> None:
        current = self.jobs.current(message)
        if message.slot == "time":
            self._run_event(message.event, current)
        elif current:
            getattr(self, f"_{message.slot}_event")(message.event)

    def _run_event(self, event, current: bool) -> None:
        """A run's events; a run replaced by a newer one still gets its final (cancelled) result, kept in
        Compare, but no longer draws on this pane."""
        record = self._job_runs.get(event.job_id)
        if record is None:
            return
        if isinstance(event, Samples):
            if current:
                self._samples(record, event)
            return
        del self._job_runs[event.job_id]
        if isinstance(event, JobFailed):
            if event.cancelled:
                record.status = "cancelled"
                self._show(record)
                self.post_message(RunsChanged())
            else:
                self._failed(record, event.error)
        elif isinstance(event, JobDone):
            self._finished(record, event.result, event.extra.get("fingerprint"))

    def _samples(self, record: LiveRun, event) -> None:
        session = self.app.session
        record.batches += 1
        if event.memory:
            session.run_memory.extend(event.memory)
            session.run_memory_kind = event.memory_kind
        if not event.phase:
            return  # memory points alone, between iterations of a slow model
        if record.seen_from is None:  # the run as this process sees it starts with its first sample
            record.seen_from, record.ui_cpu_from = session.disturbances.now(), time.process_time()
        redraw = False
        if event.phase == "first":
            record.first_iter_ms = event.samples_ms[0]
        elif event.phase == "warmup":
            record.warmup_ms.extend(event.samples_ms)
            redraw = redraw_due(record)
        elif event.phase == "timed":
            record.samples_ms.extend(event.samples_ms)
            record.first_seen.extend(event.first_seen)
            redraw = redraw_due(record, now_anyway=event.index >= event.total - 1)
            # over every sample so far: at most every LIVE_STATS_EVERY_S, never per batch; and at the first
            # timed batch, so the body never says "no timed samples yet" beside a header saying "timed 15/64"
            if redraw or record.stats is None:
                record.stats = compute_stats(record.samples_ms, batch=record.batch or 1)
        phase_changed = record.status != event.phase
        record.status, record.index, record.total = event.phase, event.index, event.total
        # While the measurement process measures, this process shares the machine's cores with it: the run's
        # lines are redrawn at most as often as its statistics, plus at each change of phase.
        if redraw or phase_changed or event.phase == "first":
            self._show(record, histogram=redraw and histogram_due(record, event))

    def _finished(self, record: LiveRun, result, fingerprint) -> None:
        record.result = result
        threads = getattr(result, "threads_used", None)
        if threads is not None and result.flags.num_threads is None:  # as run: Compare tells thread counts apart
            record.flags = result.flags.replace(num_threads=threads)
        if hasattr(result, "flags_text"):
            record.flags_text = result.flags_text()
        record.input_text = input_text(format_shape(result.input_shape), result.dtype,  # as measured
                                       getattr(result.config, "quant", None), getattr(result.config, "attn", None))
        record.status = "cancelled" if result.cancelled else "done"
        record.samples_ms = list(result.samples_ms)
        record.warmup_ms = list(result.warmup_ms)
        record.first_iter_ms = result.first_iter_ms
        record.stats = result.stats
        if len(result.sample_first_seen) == len(record.samples_ms):
            record.first_seen = list(result.sample_first_seen)
        mark_disturbed(self, record, result)
        self._show(record)
        self.post_message(RunsChanged())
        if result.cancelled or record is not self.record:
            return
        if record.stats is not None:
            self.app.notify(finished_text(record), title="run finished",
                            severity="warning" if record.disturbed else "information", timeout=4)
        save_run(self, result, fingerprint)
        self.query_one(BaselineLine).compare(result, fingerprint, record.label)
        if result.shapes != "fixed":  # FLOPs and bytes are counted at one input shape
            self.roofline_line.varying_shapes(record.label, result.shapes)
            return
        self.jobs.start("roofline", {"result": result, "report": self.app.session.report},
                        f"placing run {record.label} on the roofline", enforce_cancel=False)

    def _failed(self, record: LiveRun, error: str) -> None:
        record.status, record.error = "failed", error
        self.app.notify(error, title=f"run {record.label} failed", severity="error", timeout=8)
        self._show(record)
        self.post_message(RunsChanged())

    def _roofline_event(self, event) -> None:
        label = self.record.label if self.record is not None else "?"
        if isinstance(event, JobFailed):
            if not event.cancelled:
                self.roofline_line.failed(label, event.error)
            return
        notes = self.roofline_line.placed(event.result, label)
        run = self.record.result if self.record is not None else None
        self.post_message(self.RooflineReady(event.result, label, notes, run))

    # -- the determinism check ------------------------------------------------------------------------
    def check_determinism(self) -> None:
        """The chosen model twice on one input under the current flags: bitwise equal, or how far apart."""
        selection = self.screen.ready_selection("determinism check", module="determinism")
        if selection is None:
            return
        cfg = self.jobs.config(selection, self.determinism_note.failed)
        if cfg is None:
            return
        self.determinism_note.running(selection.model, selection.step_text(),
                                      self.app.session.flags_text(selection.flags))
        self.screen.show_tab("timing")
        self.jobs.start("determinism", {"cfg": cfg}, f"checking determinism of {selection.model}")

    def _determinism_event(self, event) -> None:
        if isinstance(event, JobFailed):
            self.determinism_note.failed(None if event.cancelled else event.error, notify=True)
        else:
            self.last_determinism = self.determinism_note.verdict(event.result)

    # -- the timing modes ------------------------------------------------------------------------------
    def start_modes(self) -> None:
        """The chosen model under the current flags in each timing mode (sync, pipelined, graph), side by side."""
        selection = self.screen.ready_selection("timing modes")
        if selection is None:
            return
        cfg = self.jobs.config(selection, self.modes_lines.refused)
        if cfg is None:
            return
        if selection.shapes != "fixed" or selection.compile != "eager":
            self.modes_lines.refused("timing modes measure the eager model at a fixed shape (a CUDA graph replays one "
                                "shape): set shapes to fixed and graph to eager")
            return
        self.modes_lines.measuring(selection.model, f"{selection.model} {selection.input_text(self.screen.default_shape())} "
                                                   f"{selection.dtype} · {selection.step_text()}")
        self.screen.show_tab("timing")  # where its lines are: pressed on another tab, nothing showed it ran
        self.jobs.start("modes", {"cfg": cfg}, f"timing modes of {selection.model}")

    def _modes_event(self, event) -> None:
        if isinstance(event, Progress):
            self.modes_lines.progress(*event.data)
        elif isinstance(event, JobFailed):
            self.modes_lines.failed(None if event.cancelled else event.error)
        else:
            self.modes_lines.answer(event.result, event.result.flags.describe(self.app.session.device_kind()),
                                    compact=self.has_class("-compact"))

    # -- lines ----------------------------------------------------------------------------------------
    def model_chosen(self, model: str) -> None:
        """Another model: a note about the last one would read as this one's, and so would its finished run's
        lines (the run stays in Compare; one still measuring stays until it ends: its line names its model)."""
        self.determinism_note.model_chosen(model)
        if self.modes_lines.model is not None and model != self.modes_lines.model:
            self.jobs.cancel("modes", enforce=False)
            self.modes_lines.clear()
        if self.record is not None and self.record.finished and self.record.model != model:
            self.clear_run()

    @on(GenerationView.Started)
    def _generation_started(self, message: GenerationView.Started) -> None:
        """A generation replaces a failed run's lines above it (they would read as the generation's failure)."""
        if self.record is not None and self.record.status == "failed":
            self.clear_run()

    def clear_run(self) -> None:
        """The current run's lines go, as before the first run (the run stays in Compare)."""
        self.record = None
        self.jobs.cancel("roofline", enforce=False)
        self.roofline_line.say("")
        self.query_one(BaselineLine).forget_run()
        self.query_one("#run-status", Static).update("")
        stats = self.query_one("#run-stats", Static)
        stats.update("")
        stats.tooltip = None
        self.query_one("#run-progress", ProgressBar).display = False
        self.query_one(LatencyHistogram).show_samples([])

    def watch_model_line(self, text: str) -> None:
        summary = self.query_one("#model-summary", Static)
        summary.remove_class("loading")
        summary.update(text)

    def on_shown(self) -> None:
        """The tab was shown: the histogram, not redrawn while hidden, catches up."""
        if self.record is not None:
            self._show(self.record)

    def _show(self, record: LiveRun, histogram: bool = True) -> None:
        if self.is_attached and record is self.record:
            self.show_run(record, histogram=histogram and self.screen.active_tab() == "timing")

    def show_run(self, record, histogram: bool = True) -> None:
        update_live(self.query_one("#run-status", Static), status_line(record), settled=record.finished)
        bar = self.query_one("#run-progress", ProgressBar)
        bar.display = True
        progress = bar_progress(record, self.app.session.iters)
        if progress is not None:
            bar.update(total=progress[0], progress=progress[1])
        stats = self.query_one("#run-stats", Static)
        text, stats.tooltip = stats_and_tooltip(record, compact=self.has_class("-compact"))
        update_live(stats, text, settled=record.finished)
        if histogram:
            repeats, new = record.split_by_shape()
            self.query_one(LatencyHistogram).show_samples(repeats, record.label, first_seen=new,
                                                          empty=WAITING_TEXT.get(record.status))


def mark_disturbed(pane: TimingPane, record: LiveRun, result) -> None:
    """What the app's process did beside the run (a resize, heavy redraws: app/runs.py) goes on the result, whose
    history record keeps it with the host's noise; the run shows both. The pane's, out of its class for its size."""
    session = pane.app.session
    if record.seen_from is not None and hasattr(result, "app_marks"):
        result.app_marks = app_marks(session.disturbances, record.seen_from,
                                     (record.seen_from, record.ui_cpu_from), result)
    record.disturbed = disturbance_marks(result)
