"""Run options beside the flags: timed iterations and warm-up, the input-shape schedule, eager or
torch.compile, and what a flag flip starts (a new run, or an interleaved A/B comparison of the old flags
against the new)."""

from __future__ import annotations

from dataclasses import dataclass

from textual import on
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.message import Message
from textual.widgets import Input, Label, Select

from torchperf_tui.app.widgets.exit_safe_select import ExitSafeSelect
from torchperf_tui.core import options as checks

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
# One row, two selects whose values say what they are: what an iteration does, and mixed precision.
STEP_CHOICES = [("infer", "infer"), ("train · sgd", "train:sgd"), ("train · adamw", "train:adamw")]
AMP_CHOICES = [("no amp", "off"), ("amp bf16", "bf16"), ("amp fp16", "fp16")]
STEP_HELP = ("what one timed iteration does: a forward pass (infer), or a training step: forward, loss, backward "
             "and the optimizer's step")
AMP_HELP = "mixed precision: torch.autocast around forward and loss (not a cast of the model, as dtype is)"
DEFAULTS = {"shapes": "fixed", "compile": "eager", "flip": "run", "step": "infer", "amp": "off"}


# (name, label, check, help): counts typed in a field, checked as the CLI checks --iters and --warmup.
COUNTS = (("iters", "iters", checks.iters, "timed iterations of a run (an A/B splits them into blocks)"),
          ("warmup", "warm-up", checks.warmup, "untimed iterations before the timed ones, or 'auto' (until the "
                                               "iteration time settles)"))


class RunOptionsPane(Vertical):
    """Iterations and warm-up (the session's, which every job reads) and three compact selects; posts Changed
    when the user picks another value."""

    @dataclass
    class Changed(Message):
        """A run option changed: `name` is "iters", "warmup", "step", "amp", "shapes", "compile" or "flip";
        `value` its new value."""

        name: str
        value: str

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.options = dict(DEFAULTS)  # the values a run uses

    DEFAULT_CSS = """
    RunOptionsPane { height: auto; }
    RunOptionsPane > Horizontal { height: auto; }
    RunOptionsPane .option-label { width: 1fr; }
    RunOptionsPane #option-row-counts Label { width: auto; padding: 0 1 0 0; color: $text-muted; }
    RunOptionsPane #option-row-counts Input { width: 7; margin-right: 1; }
    RunOptionsPane #option-row-step Select { width: 16; margin-right: 1; }
    """

    def compose(self) -> ComposeResult:
        yield Label("Run", classes="section-title")
        session = self.app.session
        with Horizontal(id="option-row-step"):
            yield ExitSafeSelect(STEP_CHOICES, value=DEFAULTS["step"], allow_blank=False, compact=True,
                                 id="option-step", tooltip=STEP_HELP)
            yield ExitSafeSelect(AMP_CHOICES, value=DEFAULTS["amp"], allow_blank=False, compact=True,
                                 id="option-amp", tooltip=AMP_HELP)
        with Horizontal(id="option-row-counts"):
            for name, label, _, help_text in COUNTS:
                yield Label(label)
                yield Input(str(getattr(session, name)), id=f"option-{name}", compact=True, tooltip=help_text)
        for name, label, choices, help_text in RUN_OPTIONS:
            with Horizontal(id=f"option-row-{name}"):
                yield ExitSafeSelect(choices, value=DEFAULTS[name], allow_blank=False, compact=True,
                                     id=f"option-{name}", tooltip=help_text)
                yield Label(label, classes="option-label")

    def set_value(self, name: str, value: str) -> None:
        """Use and show `value` without posting Changed (the app chose it, e.g. the demo)."""
        self.options[name] = value
        select = self.query_one(f"#option-{name}", Select)
        with select.prevent(Select.Changed):
            select.value = value

    @on(Input.Submitted, "#option-iters, #option-warmup")
    @on(Input.Blurred, "#option-iters, #option-warmup")
    def _count_entered(self, event) -> None:
        """A count is taken when entered (or left): checked, used by the next job, or refused in one line and
        put back to the value in use."""
        event.stop()
        field = event.input
        name = (field.id or "").removeprefix("option-")
        _, label, check, _ = next(c for c in COUNTS if c[0] == name)
        session = self.app.session
        try:
            value = check(field.value.strip())
        except checks.OptionError as exc:
            self.app.notify(f"{exc}; keeping {getattr(session, name)}", title=label, severity="error")
            field.value = str(getattr(session, name))
            return
        field.value = str(value)
        if value != getattr(session, name):
            setattr(session, name, value)
            self.post_message(self.Changed(name, str(value)))

    @on(Select.Changed)
    def _changed(self, event: Select.Changed) -> None:
        event.stop()
        name = (event.select.id or "").removeprefix("option-")
        if self.options.get(name) == event.value:
            return  # a select reporting its value as it mounts, or the same value again: nothing changed
        self.options[name] = event.value
        self.post_message(self.Changed(name, event.value))
