"""The finished run's place on the roofline, under its statistics (the words: wording.roofline): one line where it
fits, else two (the rates, then the intensity and the side), each wrapped at the pane's edge, never cut; why each
n/a is n/a in its tooltip."""

from __future__ import annotations

from textual.widgets import Static

from torchperf_tui.wording.roofline import roofline_notes, roofline_text


class RooflineLine(Static):
    """One line about the current run: being placed, placed, or why it cannot be."""

    def __init__(self) -> None:
        super().__init__("", id="run-roofline")
        self.display = False  # until there is a line to show (an empty line would still take a row)
        self._placed: tuple | None = None  # (RooflineResult, run label) while the line shows it

    def say(self, line: str, tooltip: str | None = None) -> None:
        self._placed = None
        self._show(line, tooltip)

    def _show(self, line: str, tooltip: str | None) -> None:
        self.update(line)
        self.tooltip = tooltip
        self.display = bool(line)

    def placed(self, result, label: str) -> str:
        """Run `label`'s RooflineResult on the line; -> the reasons behind each n/a (the tooltip)."""
        notes = roofline_notes(result)
        self._placed = (result, label)
        self._show(self._text(result, label), notes)
        return notes

    def _text(self, result, label: str) -> str:
        """One line where the pane is wide enough for it (or not laid out yet), else the two-line form."""
        line = f"run {label} {roofline_text(result)}"
        if 0 < self.size.width < len(line):
            return f"run {label} {roofline_text(result, split=True)}"
        return line

    def on_resize(self) -> None:
        if self._placed is not None:
            self.update(self._text(*self._placed))

    def failed(self, label: str, error: str) -> None:
        self.say(f"run {label} roofline: [b $error]n/a:[/] {error}")

    def varying_shapes(self, label: str, shapes: str) -> None:
        """FLOPs and bytes are counted at one input shape."""
        self.say(f"run {label} roofline: n/a under shape schedule {shapes} (it needs one input shape: time the "
                 "model at a fixed shape for it)")
