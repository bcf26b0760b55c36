"""Timing pane: the chosen model's summary, progress through warm-up and timed iterations, live stats
and the live latency histogram of the current run."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import ProgressBar, Static

from torchperf_tui.formatting import format_ms, format_number
from torchperf_tui.app.widgets.timing.histogram import LatencyHistogram

PHASE_TEXT = {"starting": "building model…", "first": "first iteration", "warmup": "warm-up",
              "timed": "timed", "done": "done", "cancelled": "cancelled", "failed": "failed"}


def stats_text(record) -> str:
    """Two lines of stats for a run (live or final)."""
    s = record.stats
    first = format_ms(record.first_iter_ms) if record.first_iter_ms is not None else "–"
    if s is None:
        return f"no timed samples yet · first iteration {first}"
    return (f"mean {format_ms(s.mean_ms)}  p50 {format_ms(s.p50_ms)}  p90 {format_ms(s.p90_ms)}  "
            f"p99 {format_ms(s.p99_ms)}\n"
            f"std {format_ms(s.std_ms)}  FPS {format_number(s.fps, digits=1)}  first {first}  n={s.n}")


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
        yield LatencyHistogram(id="latency-histogram")

    def show_model(self, text: str) -> None:
        summary = self.query_one("#model-summary", Static)
        summary.remove_class("loading")
        summary.update(text)

    def show_error(self, text: str) -> None:
        self.query_one("#run-status", Static).update(f"[b $error]error:[/] {text}")

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
            self.query_one(LatencyHistogram).show_samples(record.samples_ms, record.label)

    _iters: int | None = None

    def set_planned_iters(self, iters: int) -> None:
        """The number of timed iterations the run will do, so the bar covers warm-up + timed."""
        self._iters = iters
