"""The timing modes' lines under the run (key M): what is measured, each mode's median, the gaps in words; the
whole text in the tooltip. The words are wording.modes' (the CLI's `bench --modes` says the same)."""

from __future__ import annotations

from textual.markup import escape
from textual.widgets import Static

from torchperf_tui.wording.modes import medians_text, modes_full_text, modes_head, modes_marks_text


def modes_text(result, flags_text: str, compact: bool = False) -> tuple[str, str]:
    """(the lines under the run, the full text for the tooltip) of a ModesResult: what was measured, each
    mode's median (and mark), the marks whole, then the gaps in words (on a short terminal only the medians and the
    first gap)."""
    medians, full = medians_text(result), modes_full_text(result, flags_text)
    if compact:  # two rows: each mode's mark is on its median ('sync p50 6.1 ms (noisy host)'), whole in the tooltip
        return "\n".join([f"[b]modes[/] {escape(medians)}", *(escape(line) for line in result.findings[:1])]), full
    marks = modes_marks_text(result)  # a busy host or a noisy spread, per mode, as a run's
    return "\n".join([f"[b]{escape(modes_head(result, flags_text))}[/]", escape(medians),
                      *([f"[$warning]{escape(marks)}[/]"] if marks else []),
                      *(f"· {escape(line)}" for line in result.findings)]), full


class ModesLines(Static):
    """The lines of one model's timing modes (`model`): measuring, the result, or why they could not run."""

    def __init__(self) -> None:
        super().__init__("", id="run-modes")
        self.display = False  # until there is a line to show
        self.model: str | None = None  # the model the timing modes are about
        self.setup = ""  # what is measured: model, input, dtype, step
        self.result = None  # the last ModesResult (kept while the next one is measured)
        self.showing_result = False  # its lines are on screen (not a measuring, cancelled or error line)
        self._flags_text = ""

    def say(self, text: str, tooltip: str | None = None, result_lines: bool = False) -> None:
        self.update(text)
        self.tooltip = tooltip
        self.display = bool(text)
        self.showing_result = result_lines

    def measuring(self, model: str, setup: str) -> None:
        self.model, self.setup = model, setup  # the last result stays until the next one (as it did in the pane)
        self.say(f"timing modes: measuring {setup} in sync, pipelined and graph…")

    def progress(self, mode: str, done: int, total: int) -> None:
        self.say(f"timing modes: measuring {self.setup}: {mode} {done}/{total}…")

    def refused(self, error: str) -> None:
        self.say(f"timing modes: [b $error]error:[/] {escape(error)}", error)

    def failed(self, error: str | None) -> None:
        """Cancelled (`error` None), or why the modes could not be measured (in a notification too)."""
        if error is None:
            self.say("timing modes: cancelled")
            return
        self.refused(error)
        self.app.notify(error, title="timing modes failed", severity="error", timeout=8)

    def answer(self, result, flags_text: str, compact: bool) -> None:
        """The result's lines, and its first gap in a notification."""
        self.result, self._flags_text = result, flags_text
        self.say(*modes_text(result, flags_text, compact=compact), result_lines=True)
        if result.findings:
            self.app.notify(result.findings[0], title=f"timing modes of {result.model}", timeout=8)

    def compact(self, compact: bool) -> None:
        """The pane's height crossed COMPACT_BELOW_ROWS: the result's lines again, fitted (only while they are
        the lines shown: a measuring or error line stays as it is)."""
        if self.showing_result:
            self.say(*modes_text(self.result, self._flags_text, compact=compact), result_lines=True)

    def clear(self) -> None:
        self.model, self.result = None, None
        self.say("")
