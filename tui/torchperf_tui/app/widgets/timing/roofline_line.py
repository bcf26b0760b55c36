"""The finished run's place on the roofline, in one line under its statistics (the words: wording.roofline);
why each n/a is n/a in its tooltip."""

from __future__ import annotations

from textual.widgets import Static

from torchperf_tui.wording.roofline import roofline_notes, roofline_text


class RooflineLine(Static):
    """One line about the current run: being placed, placed, or why it cannot be."""

    def __init__(self) -> None:
        super().__init__("", id="run-roofline")
        self.display = False  # until there is a line to show (an empty line would still take a row)

    def say(self, line: str, tooltip: str | None = None) -> None:
        self.update(line)
        self.tooltip = tooltip
        self.display = bool(line)

    def placed(self, result, label: str) -> str:
        """Run `label`'s RooflineResult on the line; -> the reasons behind each n/a (the tooltip)."""
        notes = roofline_notes(result)
        self.say(f"run {label} {roofline_text(result)}", notes)
        return notes

    def failed(self, label: str, error: str) -> None:
        self.say(f"run {label} roofline: [b $error]n/a:[/] {error}")

    def varying_shapes(self, label: str, shapes: str) -> None:
        """FLOPs and bytes are counted at one input shape."""
        self.say(f"run {label} roofline: n/a under shape schedule {shapes} (it needs one input shape: time the "
                 "model at a fixed shape for it)")
