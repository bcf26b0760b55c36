"""Timing pane: the chosen model's summary, progress through warm-up and timed iterations, live stats
and the live latency histogram of the current run."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import ProgressBar, Static

from torchperf_tui.formatting import format_count, format_ms, format_number
from torchperf_tui.app.widgets.timing.histogram import LatencyHistogram

PHASE_TEXT = {"starting": "building model…", "first": "first iteration", "warmup": "warm-up",
              "timed": "timed", "done": "done", "cancelled": "cancelled", "failed": "failed"}


def stats_text(record) -> str:
    """Two lines of stats for a run (live or final), then what the shape schedule and torch.compile did."""
    s = record.stats
    first = format_ms(record.first_iter_ms) if record.first_iter_ms is not None else "–"
    if s is None:
        text = f"no timed samples yet · first iteration {first}"
    else:
        text = (f"mean {format_ms(s.mean_ms)}  p50 {format_ms(s.p50_ms)}  p90 {format_ms(s.p90_ms)}  "
                f"p99 {format_ms(s.p99_ms)}\n"
                f"std {format_ms(s.std_ms)}  FPS {format_number(s.fps, digits=1)}  first {first}  n={s.n}")
    extra = [line for line in (shapes_text(record), compile_text(record)) if line]
    return "\n".join([text, *extra])


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
        text += f" · tuning cost {format_ms(report.tuning_cost_ms)}"
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


def _value(value, spec: str, unit: str = "") -> str:
    """A number formatted, or "n/a" for an engine NA (whose reason is said elsewhere)."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return f"{value:{spec}}{unit}"
    return "n/a"


def roofline_text(result) -> str:
    """One line: achieved TFLOP/s, MFU (or why n/a), arithmetic intensity and the side of the roofline."""
    mfu = _value(result.mfu_pct, ".1f", " %")
    if mfu == "n/a":
        mfu = f"n/a ({short_reason(getattr(result.mfu_pct, 'reason', 'no peak'))})"
    side = f"{result.side} bound" if isinstance(result.side, str) else "side n/a"
    ridge = _value(result.ridge_flops_per_byte, ".1f")
    achieved = format_count(result.achieved_tflops * 1e12, "FLOP/s")
    return (f"roofline: {achieved} achieved · MFU {mfu} · intensity "
            f"{_value(result.arithmetic_intensity, '.1f', ' FLOP/byte')} (ridge {ridge}) · {side}")


def short_reason(reason: str, limit: int = 40) -> str:
    """The first clause of an NA reason, so the roofline stays one or two lines (the full text is a tooltip)."""
    head = reason.split(", ")[0].split("; ")[0]
    return head if len(head) <= limit else head[: limit - 1] + "…"


def roofline_notes(result) -> str:
    """Why each n/a is n/a, and the engine's notes, for the roofline line's tooltip."""
    reasons = [f"{name}: {value.reason}" for name, value in
               (("MFU", result.mfu_pct), ("ridge", result.ridge_flops_per_byte), ("side", result.side))
               if hasattr(value, "reason")]
    return "\n".join(reasons + list(result.notes) + [f"bytes moved: {result.bytes_method}"])


class TimingPane(Vertical):
    """Shows the current (or last) run; the app feeds it RunRecords."""

    DEFAULT_CSS = """
    TimingPane { height: 1fr; }
    TimingPane > Static { height: auto; }
    """

    def compose(self) -> ComposeResult:
        yield Static("loading…", id="model-summary", classes="loading")
        yield Static("", id="run-status")
        bar = ProgressBar(total=1, show_eta=False, id="run-progress")
        bar.display = False  # until the first run
        yield bar
        yield Static("", id="run-stats")
        yield Static("", id="run-roofline")
        yield Static("", id="run-note")
        yield LatencyHistogram(id="latency-histogram")

    def show_model(self, text: str) -> None:
        summary = self.query_one("#model-summary", Static)
        summary.remove_class("loading")
        summary.update(text)

    def show_error(self, text: str) -> None:
        self.query_one("#run-status", Static).update(f"[b $error]error:[/] {text}")

    def show_roofline(self, text: str, tooltip: str | None = None) -> None:
        line = self.query_one("#run-roofline", Static)
        line.update(text)
        line.tooltip = tooltip

    def show_note(self, text: str) -> None:
        """A line for one-shot checks (the determinism check) under the run's stats."""
        self.query_one("#run-note", Static).update(text)

    def show_status(self, text: str) -> None:
        self.query_one("#run-status", Static).update(text)

    def show_run(self, record, histogram: bool = True) -> None:
        phase = PHASE_TEXT.get(record.status, record.status)
        where = f"{record.index + 1}/{record.total}" if record.total and not record.finished else ""
        line = f"run {record.label} · {record.model} on {record.device} · {record.flags_text} · {phase} {where}"
        if record.error:
            line += f"\n[b $error]error:[/] {record.error}"
        self.query_one("#run-status", Static).update(line.rstrip())
        bar = self.query_one("#run-progress", ProgressBar)
        bar.display = True
        if record.status in ("warmup", "timed") and record.total:
            # One bar through warm-up then timed iterations.
            warm_total = len(record.warmup_ms) if record.status == "timed" else record.total
            timed_total = record.total if record.status == "timed" else (self._iters or 0)
            done = len(record.warmup_ms) + len(record.samples_ms)
            bar.update(total=max(warm_total + timed_total, 1), progress=done)
        elif record.status == "done":
            total = len(record.warmup_ms) + len(record.samples_ms)
            bar.update(total=max(total, 1), progress=total)
        elif record.status == "starting":
            bar.update(total=None, progress=0)  # indeterminate (animated) only while a run builds
        elif record.status in ("cancelled", "failed", "cancelling"):
            bar.update(total=1, progress=0)
        self.query_one("#run-stats", Static).update(stats_text(record))
        if histogram:
            repeats, new = record.split_by_shape()
            self.query_one(LatencyHistogram).show_samples(repeats, record.label, first_seen=new)

    _iters: int | None = None

    def set_planned_iters(self, iters: int) -> None:
        """The number of timed iterations the run will do, so the bar covers warm-up + timed."""
        self._iters = iters
