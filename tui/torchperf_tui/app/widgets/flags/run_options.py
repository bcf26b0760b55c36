"""Run options beside the flags: the input-shape schedule, eager or torch.compile, and what a flag flip
starts (a new run, or an interleaved A/B comparison of the old flags against the new)."""

from __future__ import annotations

from textual import on
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.widgets import Label, Select

from torchperf_tui.app.messages import RunOptionChanged

# (name, label, [(shown, value)], help). Values are what the engine takes (a schedule, a compile mode).
RUN_OPTIONS = (
    ("shapes", "shapes", [("fixed", "fixed"), ("cycle:4", "cycle:4"), ("random", "random")],
     "input shapes of the timed iterations: fixed, 4 sizes in turn, or a new size each iteration "
     "(cudnn.benchmark re-tunes for every new shape; first-seen iterations are drawn apart)"),
    ("compile", "graph", [("eager", "eager"), ("compile", "default"), ("compile+graphs", "reduce-overhead"),
                          ("max-autotune", "max-autotune")],
     "torch.compile the model (compile time is reported apart); compile+graphs adds CUDA graphs on a GPU"),
    ("flip", "on flip", [("new run", "run"), ("A/B", "ab")],
     "what flipping a flag starts: a new run, or the old flags against the new interleaved in blocks, "
     "with a significance verdict in Compare"),
)
DEFAULTS = {"shapes": "fixed", "compile": "eager", "flip": "run"}


class RunOptionsPane(Vertical):
    """Three compact selects; posts RunOptionChanged when the user picks another value."""

    DEFAULT_CSS = """
    RunOptionsPane { height: auto; }
    RunOptionsPane > Horizontal { height: auto; }
    RunOptionsPane .option-label { width: 1fr; }
    """

    def compose(self) -> ComposeResult:
        yield Label("Run", classes="section-title")
        for name, label, choices, help_text in RUN_OPTIONS:
            with Horizontal(id=f"option-row-{name}"):
                yield Select(choices, value=DEFAULTS[name], allow_blank=False, compact=True, id=f"option-{name}",
                             tooltip=help_text)
                yield Label(label, classes="option-label")

    def values(self) -> dict:
        return {name: self.query_one(f"#option-{name}", Select).value for name, *_ in RUN_OPTIONS}

    def set_value(self, name: str, value: str) -> None:
        """Show `value` without posting RunOptionChanged (the app chose it, e.g. the demo)."""
        select = self.query_one(f"#option-{name}", Select)
        with select.prevent(Select.Changed):
            select.value = value

    @on(Select.Changed)
    def _changed(self, event: Select.Changed) -> None:
        event.stop()
        self.post_message(RunOptionChanged((event.select.id or "").removeprefix("option-"), event.value))
