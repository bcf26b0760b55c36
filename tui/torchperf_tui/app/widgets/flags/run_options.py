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
from torchperf_tui.core.run_option_table import RunOption, run_option

# The run options the sidebar shows (core/run_option_table.py words them; the dtype and the memory format are the
# model picker's): a select per option under the step row, in this order, and two counts typed in a field.
SELECTS = tuple(run_option(name) for name in ("shapes", "compile", "flip"))
COUNTS = tuple(run_option(name) for name in ("iters", "warmup"))
# One row, two selects whose values say what they are: what an iteration does (the step with its optimizer, in
# one value: 'train:adamw'), and mixed precision.
STEP = RunOption("step", "step", f"{run_option('step').help}; {run_option('optimizer').help}", default="infer",
                 shown=(("infer", "infer"), *((f"train · {name}", f"train:{name}")
                                                for name in run_option("optimizer").choices)))
AMP = run_option("amp")
# Beside the graph mode, on its row: quantization, its values saying what they are ('no quant', 'quant int8wo'), so
# that the sidebar takes no row more and the run options stay above the fold at 80x24.
QUANT = RunOption("quant", run_option("quant").label, run_option("quant").help,
                  shown=tuple((text if value == "off" else f"quant {text}", value)
                              for text, value in run_option("quant").shown))
# Likewise beside the shape schedule: a transformers model's attention implementation ('attn default', 'attn sdpa'),
# the schedule's values then saying what they are too ('shapes fixed').
ATTN = run_option("attn")
SHAPES = RunOption("shapes", run_option("shapes").label, run_option("shapes").help, default="fixed",
                   shown=tuple((f"shapes {text}", value) for text, value in run_option("shapes").shown))
# The select paired with a row's own, in place of the row's label.
PAIRED = {"compile": QUANT, "shapes": ATTN}
# What each select shows at first: the value a run takes when it is not given.
DEFAULTS = {entry.name: entry.initial for entry in (STEP, AMP, QUANT, ATTN, *SELECTS)}
# What an option means in the sidebar beyond the table's words (which the CLI's help says too).
APP_NOTES = {"iters": "; an A/B splits them into blocks",
             "shapes": ". Here: fixed, cycle:4 (4 sizes in turn) or random (a new size each iteration)"}


class RunOptionsPane(Vertical):
    """Iterations and warm-up (the session's, which every job reads) and three compact selects; posts Changed
    when the user picks another value."""

    @dataclass
    class Changed(Message):
        """A run option changed: `name` is "iters", "warmup", "step", "amp", "shapes", "attn", "compile",
        "quant" or "flip"; `value` its new value, `before` the one it replaced (a select's)."""

        name: str
        value: str
        before: str | None = None

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.options = dict(DEFAULTS)  # the values a run uses

    DEFAULT_CSS = """
    RunOptionsPane { height: auto; }
    RunOptionsPane > Horizontal { height: auto; }
    RunOptionsPane .option-label { width: 1fr; }
    RunOptionsPane #option-row-counts Label { width: auto; padding: 0 1 0 0; color: $text-muted; }
    RunOptionsPane #option-row-counts Input { width: 7; margin-right: 1; }
    RunOptionsPane #option-row-step Select, RunOptionsPane #option-row-compile Select,
    RunOptionsPane #option-row-shapes Select { width: 16; margin-right: 1; }
    """

    def compose(self) -> ComposeResult:
        yield Label("Run", classes="section-title")
        session = self.app.session
        with Horizontal(id="option-row-step"):
            for entry in (STEP, AMP):
                yield ExitSafeSelect(entry.shown, value=DEFAULTS[entry.name], allow_blank=False, compact=True,
                                     id=f"option-{entry.name}", tooltip=entry.help)
        with Horizontal(id="option-row-counts"):
            for entry in COUNTS:
                yield Label(entry.label)
                yield Input(str(getattr(session, entry.name)), id=f"option-{entry.name}", compact=True,
                            tooltip=entry.help + APP_NOTES.get(entry.name, ""))
        for entry in SELECTS:
            paired = PAIRED.get(entry.name)
            shown = SHAPES.shown if entry.name == "shapes" else entry.shown
            with Horizontal(id=f"option-row-{entry.name}"):
                yield ExitSafeSelect(shown, value=DEFAULTS[entry.name], allow_blank=False, compact=True,
                                     id=f"option-{entry.name}", tooltip=entry.help + APP_NOTES.get(entry.name, ""))
                if paired is not None:
                    yield ExitSafeSelect(paired.shown, value=DEFAULTS[paired.name], allow_blank=False, compact=True,
                                         id=f"option-{paired.name}", tooltip=paired.help)
                else:
                    yield Label(entry.label, classes="option-label")

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
        entry = run_option(name)
        session = self.app.session
        try:
            value = entry.check(field.value.strip())
        except checks.OptionError as exc:
            self.app.notify(f"{exc}; keeping {getattr(session, name)}", title=entry.label, severity="error")
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
        before = self.options.get(name)
        if before == event.value:
            return  # a select reporting its value as it mounts, or the same value again: nothing changed
        self.options[name] = event.value
        self.post_message(self.Changed(name, event.value, before))
