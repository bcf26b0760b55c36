"""Run options beside the flags: the input-shape schedule, eager or torch.compile, and what a flag flip
starts (a new run, or an interleaved A/B comparison of the old flags against the new)."""

from __future__ import annotations

from dataclasses import dataclass

from textual import on
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.message import Message
from textual.widgets import Label, Select

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
    """Three compact selects; posts Changed when the user picks another value."""

    @dataclass
    class Changed(Message):
        """A run option changed: `name` is "shapes", "compile" or "flip"; `value` its new value."""

        name: str
        value: str

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.options = dict(DEFAULTS)  # the values a run uses

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

    def set_value(self, name: str, value: str) -> None:
        """Use and show `value` without posting Changed (the app chose it, e.g. the demo)."""
        self.options[name] = value
        select = self.query_one(f"#option-{name}", Select)
        with select.prevent(Select.Changed):
            select.value = value

    @on(Select.Changed)
    def _changed(self, event: Select.Changed) -> None:
        event.stop()
        name = (event.select.id or "").removeprefix("option-")
        if self.options.get(name) == event.value:
            return  # a select reporting its value as it mounts, or the same value again: nothing changed
        self.options[name] = event.value
        self.post_message(self.Changed(name, event.value))
