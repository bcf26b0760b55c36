"""Timing pane: the chosen model's summary, progress through warm-up and timed iterations, live stats
and the live latency histogram of the current run. It owns the timing run (key r), its follow-up steps
(saved to the history, placed on the roofline), the determinism check (key d) and the timing modes side by
side (key M)."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from textual import on
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.markup import escape
from textual.message import Message
from textual.reactive import reactive
from textual.widgets import ProgressBar, Static

from torchperf_tui.formatting import (budget_text, format_bytes, format_count, format_ms, format_number, format_shape,
                                      number_text, unsupported_mark)
from torchperf_tui.app.job_slots import JobSlots
from torchperf_tui.app.messages import JobEvent, RunsChanged
from torchperf_tui.app.runs import RunRecord, app_marks, save_run
from torchperf_tui.app.widgets.timing.histogram import LatencyHistogram
from torchperf_tui.worker.protocol import JobDone, JobFailed, Progress, Samples

COMPACT_BELOW_ROWS = 30  # the pane's height under which its lines are compact
LIVE_STATS_EVERY_S = 0.5  # live statistics over all samples so far are recomputed at most this often

# What the histogram says while a run has no timed sample yet (not "press r": a run is under way).
WAITING_TEXT = {"starting": "building the model: the histogram fills with the timed iterations",
                "cancelling": "cancelling…", "first": "first iteration: the histogram fills with the timed ones",
                "warmup": "warming up: the histogram fills with the timed iterations",
                "cancelled": "cancelled before any timed iteration", "failed": "the run failed: no samples"}
PHASE_TEXT = {"starting": "building model…", "first": "first iteration", "warmup": "warm-up",
              "timed": "timed", "done": "done", "cancelled": "cancelled", "failed": "failed"}


def stats_text(record, compact: bool = False) -> str:
    """The stats of a run (live or final), then what the shape schedule and torch.compile did; `compact`
    (a short terminal): the percentiles on one line, the rest on another. A failed run: its error, whole."""
    s = record.stats
    first = format_ms(record.first_iter_ms) if record.first_iter_ms is not None else "–"
    if record.error:
        text = f"[b $error]error:[/] {escape(record.error)}"
    elif s is None:
        text = f"no timed samples yet · first iteration {first}"
    elif compact:
        intervals = _intervals(record)
        p50, p90, p99 = (percentile_cell(intervals, name, value) for name, value in
                         (("p50", s.p50_ms), ("p90", s.p90_ms), ("p99", s.p99_ms)))
        text = (f"p50 {p50}  p90 {p90}  p99 {p99}\n"
                f"mean {format_ms(s.mean_ms)}  std {format_ms(s.std_ms)}  FPS {format_number(s.fps_at_median, digits=1)}"
                f" at p50  n={s.n}  first {first}")
    else:
        intervals = _intervals(record)
        p50, p90, p99 = (percentile_cell(intervals, name, value) for name, value in
                         (("p50", s.p50_ms), ("p90", s.p90_ms), ("p99", s.p99_ms)))
        text = (f"mean {format_ms(s.mean_ms)}  p50 {p50}  p90 {p90}  p99 {p99}\n"
                f"std {format_ms(s.std_ms)}  FPS {format_number(s.fps_at_median, digits=1)} at p50 "
                f"({format_number(s.fps, digits=1)} at the mean)  first {first}  n={s.n}\n"
                f"{intervals_text(record, intervals)}")
    budget = budget_text(record.result) if getattr(record.result, "budget_stopped", False) else ""
    extra = [line for line in (shapes_text(record), compile_text(record), peak_text(record), budget,
                               conditions_text(record, compact), state_text(record),
                               disturbed_text(record, compact)) if line]
    return "\n".join([text, *extra])


def state_text(record) -> str:
    """What the model's code changed in torch's global state during the run (put back since), in the warning
    colour: the numbers were not all measured under the run's flags, or the next model would have paid."""
    notes = getattr(record.result, "state_notes", None) or []
    return "\n".join(f"[b $warning]torch state:[/] {escape(note)}" for note in notes)


def conditions_text(record, compact: bool = False) -> str:
    """A finished CUDA run: the GPU's clocks, temperature, power, energy per item and throttling over its
    timed iterations; throttling in the warning colour, with its reasons and shares unless `compact` (then the
    clocks, energy and the word alone)."""
    conditions = getattr(record.result, "conditions", None)
    if conditions is None:
        return ""
    step = getattr(record.result, "step", "infer")
    line = f"GPU over run {record.label}: {escape(conditions.short(step, brief=compact))}"
    if conditions.throttled_share:
        line = f"[$warning]{line}[/]"
        if not compact:
            line += f"\n[b $warning]{escape(conditions.throttle_text())}[/]"
    return line


def disturbed_text(record, compact: bool = False) -> str:
    """A finished run's marks in the warning colour: 'disturbed: window resized during the run; noisy host: load
    3.1 on 2 cores, ...' (what the app saw beside the run, then engine/host_noise.py's findings); '' when none.
    `compact`: each mark's head alone ('disturbed: noisy host, noisy samples'), one row that leaves the histogram
    its bars; the whole marks are in the tooltip."""
    if not record.disturbed:
        return ""
    if compact:
        return f"[b $warning]disturbed:[/] [$warning]{escape(', '.join(m.split(':')[0] for m in record.disturbed))}[/]"
    return f"[b $warning]disturbed:[/] [$warning]{escape('; '.join(record.disturbed))}[/]"


def _intervals(record) -> dict:
    from torchperf_tui.engine.stats import percentile_intervals

    return {interval.name: interval for interval in percentile_intervals(record.samples_ms)}


def percentile_cell(intervals: dict, name: str, value_ms: float) -> str:
    """'6.07 ms', or '14.6 ms?' when the samples cannot support that percentile (intervals_text says why)."""
    interval = intervals.get(name)
    return format_ms(value_ms) + unsupported_mark(interval is None or interval.supported, "$warning")


def intervals_text(record, intervals: dict | None = None) -> str:
    """'95 % CI  p50 4.68-4.73 ms · p90 6.21-7.10 ms · p99? not supported by 50 samples, needs 555'."""
    from torchperf_tui.formatting import interval_text

    intervals = _intervals(record) if intervals is None else intervals
    parts = [f"{name}{unsupported_mark(i.supported)} {interval_text(i)}" for name, i in intervals.items()]
    return "95 % CI  " + " · ".join(parts) if parts else ""


def peak_text(record) -> str:
    """A finished CUDA training run: the allocator's peak over its steps beside one forward pass's alone."""
    result = record.result
    if getattr(result, "step_peak_bytes", None) is None:
        return ""
    return (f"peak allocated: training step {format_bytes(result.step_peak_bytes)} · forward pass alone "
            f"{format_bytes(result.forward_peak_bytes)}")


def _median(values) -> float | None:
    import statistics  # here, not at import: this module is on the first frame's path

    return statistics.median(values) if values else None


def shapes_text(record) -> str:
    """Under a varying schedule: first-seen iterations against repeats, and the tuning cost when done."""
    if record.shapes == "fixed":
        return ""
    repeats, new = record.split_by_shape()
    text = (f"shapes {record.shapes}: {len(new)} new-shape iteration(s) p50 {format_ms(_median(new))} · "
            f"{len(repeats)} repeat(s) p50 {format_ms(_median(repeats))}")
    report = getattr(record.result, "shape_report", None)
    if report is not None:
        if report.tuning_cost_ms > 0:
            text += f" · tuning cost {format_ms(report.tuning_cost_ms)}"
        else:  # noise, or a first call that was not slower: not a negative cost
            text += (f" · no tuning cost measured (first-seen iterations were {format_ms(-report.tuning_cost_ms)} "
                     "faster than their repeats, in sum)")
        if report.unrepeated:
            text += f" ({report.unrepeated} shape(s) never repeated)"
    return text


def compile_text(record) -> str:
    """torch.compile: the compile time apart from the samples, or why it failed (eager numbers shown)."""
    result = record.result
    if record.compile is None:
        return ""
    if result is None:
        return f"torch.compile mode {record.compile}: compiling before the timed iterations…"
    if result.compiled:
        return f"torch.compile mode {record.compile}: compiled in {result.compile_s:.1f} s (not in the samples)"
    return f"[b $warning]torch.compile failed, eager numbers shown:[/] {result.compile_error}"


def roofline_text(result) -> str:
    """One line: achieved TFLOP/s, MFU (or why n/a), arithmetic intensity and the side of the roofline."""
    from torchperf_tui.engine.roofline import utilisation_text  # the CLI's wording (above 100 %: no fact)

    mfu = utilisation_text(result, "mfu_pct")
    if mfu == "n/a":
        mfu = f"n/a ({short_reason(getattr(result.mfu_pct, 'reason', 'no peak'))})"
    side = f"{result.side} bound" if isinstance(result.side, str) else "side n/a"
    ridge = number_text(result.ridge_flops_per_byte, ".1f", na="n/a")
    achieved = format_count(result.achieved_tflops * 1e12, "FLOP/s")
    of = " of a training step" if getattr(result, "step", "infer") == "train" else ""
    measured = utilisation_text(result, "measured_mfu_pct") if hasattr(result, "measured_mfu_pct") else "n/a"
    if measured != "n/a" and result.peak_tflops != result.measured_tflops:
        # beside a datasheet peak (on the CPU it is the peak): the engine's figure, or its sentence above 100 %
        above = measured in getattr(result, "above_ceiling", {}).values()
        mfu += f" ({measured if above else f'{measured} of the measured ceiling'})"
    text = (f"roofline{of}: {achieved} achieved · MFU {mfu} · intensity "
            f"{number_text(result.arithmetic_intensity, '.1f', ' FLOP/byte', na='n/a')} (ridge {ridge}) · {side}")
    if any(hasattr(value, "reason") for value in (result.mfu_pct, result.ridge_flops_per_byte, result.side)):
        text += " · why n/a: Device tab"
    return text


def short_reason(reason: str, limit: int = 40) -> str:
    """The first clause of an NA reason, so the roofline stays one or two lines (the full text is in the Device
    tab and the line's tooltip)."""
    head = reason.split(", ")[0].split("; ")[0]
    return head if len(head) <= limit else head[: limit - 1] + "…"


def roofline_notes(result) -> str:
    """Why each n/a is n/a, and the engine's notes, for the roofline line's tooltip."""
    reasons = [f"{name}: {value.reason}" for name, value in
               (("MFU", result.mfu_pct), ("ridge", result.ridge_flops_per_byte), ("side", result.side))
               if hasattr(value, "reason")]
    return "\n".join(reasons + list(result.notes) + [f"bytes moved: {result.bytes_method}"])


def modes_text(result, flags_text: str, compact: bool = False) -> tuple[str, str]:
    """(the lines under the run, the full text for the tooltip) of a ModesResult: what was measured, each
    mode's median, then the gaps in words (on a short terminal only the first line and the first gap)."""
    shape = format_shape(result.input_shape)
    head = f"timing modes of {result.model} {shape} {result.dtype} · {result.step} · {flags_text}"
    parts = []
    for mode in result.modes:
        if mode.unavailable is not None:
            parts.append(f"{mode.mode} n/a")
        elif mode.stats is None:
            parts.append(f"{mode.mode} –")
        else:
            unit = f" (blocks of {result.per_block})" if mode.mode == "pipelined" else ""
            parts.append(f"{mode.mode} p50 {format_ms(mode.stats.p50_ms)}{unit}")
    medians = " · ".join(parts) + (" · cancelled" if result.cancelled else "")
    why_not = [f"{mode.mode}: {mode.unavailable}" for mode in result.modes if mode.unavailable is not None]
    full = "\n".join([head, medians, *result.findings, *why_not])
    if compact:
        return "\n".join([f"[b]modes[/] {escape(medians)}", *(escape(line) for line in result.findings[:1])]), full
    return "\n".join([f"[b]{escape(head)}[/]", escape(medians), *(f"· {escape(line)}" for line in result.findings)]), full


class TimingPane(Vertical):
    """The current (or last) run. Jobs: "run" (timing), "roofline" (of the finished run), "determinism"."""

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
    roofline: reactive[tuple] = reactive(("", None), init=False)  # (the current run's line, its tooltip)
    note: reactive[str] = reactive("", init=False)  # one-shot checks: the determinism check
    modes: reactive[tuple] = reactive(("", None), init=False)  # (the timing modes' lines, their full text)

    DEFAULT_CSS = """
    TimingPane { height: 1fr; }
    TimingPane > Static { height: auto; }
    TimingPane.-compact #model-summary, TimingPane.-compact #run-status, TimingPane.-compact #run-roofline,
    TimingPane.-compact #run-modes {
        text-wrap: nowrap;
        text-overflow: ellipsis;
    }
    """

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.jobs = JobSlots(self)
        self.record: RunRecord | None = None  # the current run
        self._job_runs: dict[int, RunRecord] = {}  # job id -> its run, until its final answer
        self.last_determinism = None  # the latest DeterminismReport
        self._note_spec: str | None = None  # the model the note is about
        self.last_modes = None  # the latest ModesResult
        self._modes_spec: str | None = None  # the model the timing modes are about

    def compose(self) -> ComposeResult:
        yield Static("loading…", id="model-summary", classes="loading")
        yield Static("", id="run-status")
        bar = ProgressBar(total=1, show_eta=False, id="run-progress")
        bar.display = False  # until the first run
        yield bar
        yield Static("", id="run-stats")
        for empty in (Static("", id="run-roofline"), Static("", id="run-note"), Static("", id="run-modes")):
            empty.display = False  # until there is a line to show
            yield empty
        yield LatencyHistogram(id="latency-histogram")

    def on_resize(self, event) -> None:
        """Short of COMPACT_BELOW_ROWS rows (80x24 leaves 20) the lines above the histogram take one row each
        (cut at the edge: the full text is in Layers, Device and the notifications) so it keeps its bars."""
        compact = event.size.height < COMPACT_BELOW_ROWS
        if compact != self.has_class("-compact"):
            self.set_class(compact, "-compact")
            if self.record is not None:
                self._show(self.record, histogram=False)
            if self.last_modes is not None and self.modes[0]:
                self.modes = modes_text(self.last_modes, self.last_modes.flags.describe(self.app.session.device_kind()),
                                        compact=compact)

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
        record = RunRecord(run_id=session.new_run_id(), model=selection.spec, step=selection.step_text(),
                           device=session.resolved_device(),
                           flags=selection.flags, flags_text=selection.flags.describe(session.device_kind()),
                           shapes=selection.shapes, compile=None if selection.compile == "eager" else selection.compile,
                           input_text=f"{selection.input_text(self.screen.default_shape())} {selection.dtype}")
        session.runs.add(record)
        session.run_memory.clear()
        self.record = record
        self.jobs.cancel("roofline", enforce=False)  # the last run's: it would land under this one
        self.roofline = ("", None)
        self._show(record)
        self.post_message(RunsChanged())
        cfg = self.jobs.config(selection, lambda error: self._failed(record, error), slot="run")
        if cfg is None:
            return
        record.batch = cfg.batch or 1
        note = self.app.session.engine.inputs.dtype_note(selection.dtype, session.device_kind())
        if note:
            self.app.notify(note, title="dtype", severity="warning", timeout=8)
        what = f"timing {selection.spec} at {selection.input_text(self.screen.default_shape())}"
        self._job_runs[self.jobs.start("run", "time", {"cfg": cfg}, what)] = record

    def cancel_run(self) -> None:
        self._mark_cancelling()

    def _mark_cancelling(self) -> None:
        if self.record is not None and not self.record.finished:
            self.record.status = "cancelling"
            self._show(self.record, histogram=False)

    @on(JobEvent)
    def _job_event(self, message: JobEvent) -> None:
        current = self.jobs.current(message)
        if message.slot == "run":
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

    def _samples(self, record: RunRecord, event) -> None:
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
            redraw = self._due(record)
        elif event.phase == "timed":
            record.samples_ms.extend(event.samples_ms)
            record.first_seen.extend(event.first_seen)
            redraw = self._due(record, now_anyway=event.index >= event.total - 1)
            # over every sample so far: at most every LIVE_STATS_EVERY_S, never per batch; and at the first
            # timed batch, so the body never says "no timed samples yet" beside a header saying "timed 15/64"
            if redraw or record.stats is None:
                record.stats = session.engine.stats.compute_stats(record.samples_ms, batch=record.batch or 1)
        phase_changed = record.status != event.phase
        record.status, record.index, record.total = event.phase, event.index, event.total
        # While the measurement process measures, this process shares the machine's cores with it: the run's
        # lines are redrawn at most as often as its statistics, plus at each change of phase.
        if redraw or phase_changed or event.phase == "first":
            self._show(record, histogram=redraw)

    @staticmethod
    def _due(record: RunRecord, now_anyway: bool = False) -> bool:
        """True at most every LIVE_STATS_EVERY_S per run (or when `now_anyway`): when its lines are redrawn."""
        now = time.monotonic()
        if not now_anyway and now - record.stats_at < LIVE_STATS_EVERY_S:
            return False
        record.stats_at = now
        return True

    def _finished(self, record: RunRecord, result, fingerprint) -> None:
        record.result = result
        threads = getattr(result, "threads_used", None)
        if threads is not None and result.flags.num_threads is None:  # as run: Compare tells thread counts apart
            record.flags = result.flags.replace(num_threads=threads)
        if hasattr(result, "flags_text"):
            record.flags_text = result.flags_text()
        record.input_text = f"{format_shape(result.input_shape)} {result.dtype}"  # as measured
        record.status = "cancelled" if result.cancelled else "done"
        record.samples_ms = list(result.samples_ms)
        record.warmup_ms = list(result.warmup_ms)
        record.first_iter_ms = result.first_iter_ms
        record.stats = result.stats
        if len(result.sample_first_seen) == len(record.samples_ms):
            record.first_seen = list(result.sample_first_seen)
        self._mark_disturbed(record, result)
        self._show(record)
        self.post_message(RunsChanged())
        if result.cancelled or record is not self.record:
            return
        if record.stats is not None:
            self.app.notify(f"{record.label} {record.model}: median {format_ms(record.stats.p50_ms)}, "
                            f"p99 {format_ms(record.stats.p99_ms)}"
                            + (f" · disturbed: {record.disturbed[0]}" if record.disturbed else ""),
                            title="run finished", severity="warning" if record.disturbed else "information",
                            timeout=4)
        save_run(self, result, fingerprint)
        if result.shapes != "fixed":  # FLOPs and bytes are counted at one input shape
            self.roofline = (f"run {record.label} roofline: n/a under shape schedule {result.shapes} (it needs "
                             "one input shape: time the model at a fixed shape for it)", None)
            return
        self.jobs.start("roofline", "roofline", {"result": result, "report": self.app.session.report},
                        f"placing run {record.label} on the roofline", enforce_cancel=False)

    def _mark_disturbed(self, record: RunRecord, result) -> None:
        """What this process did beside the run (a resize, heavy redraws: app/runs.py) goes on the result, whose
        history record keeps it with the host's noise; the run shows both."""
        session = self.app.session
        if record.seen_from is not None and hasattr(result, "disturbed"):
            result.disturbed = app_marks(session.disturbances, record.seen_from,
                                         (record.seen_from, record.ui_cpu_from))
        record.disturbed = list(result.disturbance_marks()) if hasattr(result, "disturbance_marks") else []

    def _failed(self, record: RunRecord, error: str) -> None:
        record.status, record.error = "failed", error
        self.app.notify(error, title=f"run {record.label} failed", severity="error", timeout=8)
        self._show(record)
        self.post_message(RunsChanged())

    def _roofline_event(self, event) -> None:
        label = self.record.label if self.record is not None else "?"
        if isinstance(event, JobFailed):
            if not event.cancelled:
                self.roofline = (f"run {label} roofline: [b $error]n/a:[/] {event.error}", None)
            return
        line, notes = f"run {label} {roofline_text(event.result)}", roofline_notes(event.result)
        self.roofline = (line, notes)
        run = self.record.result if self.record is not None else None
        self.post_message(self.RooflineReady(event.result, label, notes, run))

    # -- the determinism check ------------------------------------------------------------------------
    def check_determinism(self) -> None:
        """The chosen model twice on one input under the current flags: bitwise equal, or how far apart."""
        selection = self.screen.ready_selection("determinism check", module="determinism")
        if selection is None:
            return
        cfg = self.jobs.config(selection, self._determinism_refused)
        if cfg is None:
            return
        self._note_spec = selection.spec
        self.note = (f"determinism: running {selection.spec} ({selection.step_text()}) twice under "
                       f"{selection.flags.describe(self.app.session.device_kind())}…")
        self.screen.show_tab("timing")
        self.jobs.start("determinism", "determinism", {"cfg": cfg}, f"checking determinism of {selection.spec}")

    def _determinism_refused(self, error: str) -> None:
        self.note = f"determinism: [b $error]error:[/] {error}"

    def _determinism_event(self, event) -> None:
        if isinstance(event, JobFailed):
            self.note = ("determinism: cancelled" if event.cancelled
                           else f"determinism: [b $error]error:[/] {event.error}")
            if not event.cancelled:
                self.app.notify(event.error, title="determinism failed", severity="error", timeout=8)
            return
        result = self.last_determinism = event.result
        style = "$success" if result.bitwise_equal else "$warning"
        self.note = (f"[b {style}]determinism of {self._note_spec}:[/] {result.summary()}")
        self.app.notify(result.summary(), title="determinism check", timeout=8)

    # -- the timing modes ------------------------------------------------------------------------------
    def start_modes(self) -> None:
        """The chosen model under the current flags in each timing mode (sync, pipelined, graph), side by side."""
        selection = self.screen.ready_selection("timing modes")
        if selection is None:
            return
        cfg = self.jobs.config(selection, self._modes_refused)
        if cfg is None:
            return
        if selection.shapes != "fixed" or selection.compile != "eager":
            self._modes_refused("timing modes measure the eager model at a fixed shape (a CUDA graph replays one "
                                "shape): set shapes to fixed and graph to eager")
            return
        self._modes_spec = selection.spec
        self._modes_setup = (f"{selection.spec} {selection.input_text(self.screen.default_shape())} "
                             f"{selection.dtype} · {selection.step_text()}")
        self.modes = (f"timing modes: measuring {self._modes_setup} in sync, pipelined and graph…", None)
        self.screen.show_tab("timing")  # where its lines are: pressed on another tab, nothing showed it ran
        self.jobs.start("modes", "modes", {"cfg": cfg}, f"timing modes of {selection.spec}")

    def _modes_refused(self, error: str) -> None:
        self.modes = (f"timing modes: [b $error]error:[/] {escape(error)}", error)

    def _modes_event(self, event) -> None:
        if isinstance(event, Progress):
            mode, done, total = event.data
            self.modes = (f"timing modes: measuring {self._modes_setup}: {mode} {done}/{total}…", None)
            return
        if isinstance(event, JobFailed):
            if event.cancelled:
                self.modes = ("timing modes: cancelled", None)
            else:
                self._modes_refused(event.error)
                self.app.notify(event.error, title="timing modes failed", severity="error", timeout=8)
            return
        result = self.last_modes = event.result
        self.modes = modes_text(result, result.flags.describe(self.app.session.device_kind()),
                                compact=self.has_class("-compact"))
        if result.findings:
            self.app.notify(result.findings[0], title=f"timing modes of {result.model}", timeout=8)

    # -- lines ----------------------------------------------------------------------------------------
    def model_chosen(self, spec: str) -> None:
        """Another model: a note about the last one would read as this one's."""
        if self._note_spec is not None and spec != self._note_spec:
            self.note, self._note_spec = "", None
        if self._modes_spec is not None and spec != self._modes_spec:
            self.jobs.cancel("modes", enforce=False)
            self.modes, self._modes_spec, self.last_modes = ("", None), None, None

    def watch_model_line(self, text: str) -> None:
        summary = self.query_one("#model-summary", Static)
        summary.remove_class("loading")
        summary.update(text)

    def watch_roofline(self, line: tuple) -> None:
        widget = self.query_one("#run-roofline", Static)
        widget.update(line[0])
        widget.tooltip = line[1]
        widget.display = bool(line[0])  # an empty line would still take a row from the histogram

    def watch_modes(self, lines: tuple) -> None:
        widget = self.query_one("#run-modes", Static)
        widget.update(lines[0])
        widget.tooltip = lines[1]
        widget.display = bool(lines[0])

    def watch_note(self, text: str) -> None:
        widget = self.query_one("#run-note", Static)
        widget.update(text)
        widget.display = bool(text)

    def on_shown(self) -> None:
        """The tab was shown: the histogram, not redrawn while hidden, catches up."""
        if self.record is not None:
            self._show(self.record)

    def _show(self, record: RunRecord, histogram: bool = True) -> None:
        if self.is_attached and record is self.record:
            self.show_run(record, histogram=histogram and self.screen.active_tab() == "timing")

    def show_run(self, record, histogram: bool = True) -> None:
        phase = PHASE_TEXT.get(record.status, record.status)
        where = f"{record.index + 1}/{record.total}" if record.total and not record.finished else ""
        # What the run is doing first: on a short terminal the line is cut at the pane's edge.
        step = f" · {record.step}" if record.step != "infer" else ""
        line = (f"run {record.label} · {phase}{' ' + where if where else ''} · {record.model} {record.input_text} "
                f"on {record.device}{step} · {record.flags_text}")
        self.query_one("#run-status", Static).update(line)
        bar = self.query_one("#run-progress", ProgressBar)
        bar.display = True
        if record.status in ("warmup", "timed") and record.total:
            # One bar through warm-up then timed iterations.
            warm_total = len(record.warmup_ms) if record.status == "timed" else record.total
            timed_total = record.total if record.status == "timed" else self.app.session.iters
            done = len(record.warmup_ms) + len(record.samples_ms)
            bar.update(total=max(warm_total + timed_total, 1), progress=done)
        elif record.status == "done":
            total = len(record.warmup_ms) + len(record.samples_ms)
            bar.update(total=max(total, 1), progress=total)
        elif record.status == "starting":
            bar.update(total=None, progress=0)  # indeterminate (animated) only while a run builds
        elif record.status in ("cancelled", "failed", "cancelling"):
            bar.update(total=1, progress=0)
        stats = self.query_one("#run-stats", Static)
        stats.update(stats_text(record, compact=self.has_class("-compact")))
        # on a short terminal the "?" is explained here, and the disturbance marks are said whole
        stats.tooltip = "\n".join([line for line in (intervals_text(record),) if line] + record.disturbed) or None
        if histogram:
            repeats, new = record.split_by_shape()
            self.query_one(LatencyHistogram).show_samples(repeats, record.label, first_seen=new,
                                                          empty=WAITING_TEXT.get(record.status))
