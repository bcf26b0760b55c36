"""The baseline marked in History (key b), and each timing run after it against it, in the Timing pane: the
gate's own wording (wording/baseline.py), as `compare --baseline` prints it: ratio, interval, verdict, gate,
differences and the environment.

The verdict takes scipy (its import costs a fraction of a second) and a bootstrap: both run in a thread of this
widget, never on the event loop. No torch: the run's record is made from the result as the history's is."""

from __future__ import annotations

from textual import on, work
from textual.content import Content
from textual.message import Message
from textual.widgets import Static
from textual.worker import get_current_worker

from torchperf_tui.wording.history import history_row
from torchperf_tui.core.errors import user_message
from torchperf_tui.engine.records.baseline_gate import gate
from torchperf_tui.engine.records.result_records import records_of
from torchperf_tui.wording.baseline import gate_lines


class BaselineLine(Static):
    """The baseline (a HistoryRecord, or None) and the latest run against it."""

    class _Verdict(Message, bubble=False):
        """The thread's lines for run `label` (or its one-line error)."""

        def __init__(self, baseline_id: str, label: str, lines: list[str] | None, error: str | None = None) -> None:
            super().__init__()
            self.baseline_id, self.label, self.lines, self.error = baseline_id, label, lines, error

    def __init__(self) -> None:
        super().__init__("", id="run-baseline")
        self.baseline = None
        self.display = False  # until a baseline is marked

    def set_baseline(self, record) -> None:
        """Mark `record` (a timing HistoryRecord) as the baseline, or unmark with None."""
        self.baseline = record
        if record is None:
            self.update("")
            self.display = False
            return
        row = history_row(record)  # its strings printable: the record was read from the history file
        p50 = f", p50 {row.p50}" if record.stats is not None else ""
        # Content, not markup: a model's name from a file is shown as it is
        self.update(Content(f"baseline {row.short_id} ({row.model} {row.input}{p50}, marked in History): the next run "
                            "is shown against it"))
        self.display = True

    def forget_run(self) -> None:
        """The run it was shown against is no longer on the pane: the baseline's own line again."""
        self.workers.cancel_group(self, "baseline-verdict")
        self.set_baseline(self.baseline)

    def compare(self, result, fingerprint: dict | None, label: str) -> None:
        """Run `label`'s finished TimingResult against the baseline, if one is marked."""
        if self.baseline is None or result.cancelled or not result.samples_ms:
            return
        self.update(f"run {label} against baseline {self.baseline.short_id}: computing the interval…")
        self._verdict(self.baseline, result, dict(fingerprint or {}), label)

    @work(thread=True, exclusive=True, group="baseline-verdict", exit_on_error=False)
    def _verdict(self, baseline, result, fingerprint: dict, label: str) -> None:
        try:
            now = records_of(result, fingerprint)[0]  # {}: no fingerprint taken here (that would import torch)
            message = self._Verdict(baseline.id, label, gate_lines(gate(baseline, now, source="marked in History"),
                                                                   exit_code=False))
        except Exception as exc:  # a run the gate cannot compare: one line, the app goes on
            message = self._Verdict(baseline.id, label, None, user_message(exc))
        if not get_current_worker().is_cancelled:
            self.post_message(message)

    @on(_Verdict)
    def _show_verdict(self, message: _Verdict) -> None:
        if self.baseline is None or message.baseline_id != self.baseline.id:
            return  # unmarked, or another baseline marked, since
        if message.error is not None:
            self.update(f"run {message.label} against baseline: [b $error]n/a:[/] {message.error}")
            return
        lines = [line.replace("[", r"\[") for line in message.lines]  # the words, not markup
        self.update(f"run {message.label} against the baseline: " + "\n".join(lines))
