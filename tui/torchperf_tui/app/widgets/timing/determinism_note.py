"""The determinism check's line under the run (key d): what runs, then bitwise equal or how far apart."""

from __future__ import annotations

from textual.widgets import Static


class DeterminismNote(Static):
    """One line about one model (`model`): a note about another model's check would read as this one's."""

    def __init__(self) -> None:
        super().__init__("", id="run-note")
        self.display = False  # until there is a line to show
        self.model: str | None = None  # the model the note is about

    def say(self, text: str) -> None:
        self.update(text)
        self.display = bool(text)

    def running(self, model: str, step_text: str, flags_text: str) -> None:
        self.model = model
        self.say(f"determinism: running {model} ({step_text}) twice under {flags_text}…")

    def failed(self, error: str | None, notify: bool = False) -> None:
        """Cancelled (`error` None), or why the check could not run (`notify`: in a notification too)."""
        self.say("determinism: cancelled" if error is None else f"determinism: [b $error]error:[/] {error}")
        if notify and error is not None:
            self.app.notify(error, title="determinism failed", severity="error", timeout=8)

    def verdict(self, report):
        """The check's answer, on the line and in a notification; -> the report."""
        style = "$success" if report.bitwise_equal else "$warning"
        self.say(f"[b {style}]determinism of {self.model}:[/] {report.summary()}")
        self.app.notify(report.summary(), title="determinism check", timeout=8)
        return report

    def model_chosen(self, model: str) -> None:
        if self.model is not None and model != self.model:
            self.model = None
            self.say("")
