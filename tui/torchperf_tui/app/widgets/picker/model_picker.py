"""Model picker: every source's catalogue (torchvision's by task, timm, transformers) with a fuzzy filter, a custom
module:factory field, the input settings (shape, batch, dtype, channels_last) and the model's overrides and
sequence length (args, seq). It owns the catalogue and the model's analysis (parameters, FLOPs, layers on the meta
device), both answered by the measurement process (it imports the user's module, so a module that crashes cannot
take the app down)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from textual import on
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.content import Content
from textual.message import Message
from textual.widgets import Checkbox, Input, Label, OptionList, Select, Static
from textual.widgets.option_list import Option

from torchperf_tui.app.messages import JobEvent
from torchperf_tui.app.pane_jobs import PaneJobs
from torchperf_tui.app.widgets.exit_safe_select import ExitSafeSelect
from torchperf_tui.app.widgets.picker.args_row import SEQ_EXAMPLE, ArgsRow
from torchperf_tui.app.widgets.picker.model_filter import CatalogueIndex, bare_name
from torchperf_tui.engine.workloads.inputs import dtype_note
from torchperf_tui.engine.workloads.model_source import source_of
from torchperf_tui.core.formatting import format_shape
from torchperf_tui.core.run_option_table import run_option
from torchperf_tui.measure.protocol import JobFailed
from torchperf_tui.wording.refusals import app_message

SHAPE_EXAMPLE = "3x224x224"  # the shape field's placeholder until a model's default input is known
MAX_PER_GROUP = 60  # entries listed under a heading; a line says how many more match (typing narrows them)


def seq_placeholder(model: str | None, input_shape: tuple) -> str:
    """The seq field's placeholder: a transformers model's sequence length as analysed (its input is token ids,
    (batch, length)), '-' for another source's model (SEQ_EXAMPLE before any model is analysed)."""
    return str(input_shape[-1]) if source_of(model or "") == "hf" and len(input_shape) == 2 else "-"


class ModelPicker(Vertical):
    """Pick a model and describe its input. `model` is the model chosen, `complexity` its analysis at the
    input typed (None while it runs); posts CatalogueReady, Analysing, Analysed and Failed."""

    @dataclass
    class CatalogueReady(Message):
        """The catalogue is listed (or `error` says why not)."""

        error: str | None = None

    @dataclass
    class Analysing(Message):
        """A model was chosen (or its input changed) and is being analysed."""

        model: str

    @dataclass
    class Analysed(Message):
        """The chosen model's analysis (a Complexity) at the input typed."""

        model: str
        complexity: Any

    @dataclass
    class Failed(Message):
        """Resolving or analysing the chosen model failed; `error` is one line."""

        model: str
        error: str

    DEFAULT_CSS = """
    ModelPicker { height: auto; }
    ModelPicker #model-list { height: 8; }
    ModelPicker Horizontal { height: auto; }
    """

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self._entries: list = []
        self._index = CatalogueIndex([])
        self._options: dict[str, Option] = {}  # an entry's option, made once: its prompt is parsed once
        self.model: str | None = None
        self._shape_typed = False  # the shape field holds what the user typed, not the model's default
        self._shape_given = False  # the user gave this model a shape (typed, ⏎), kept with it when another is chosen
        self.complexity: Any = None
        self._analysed: dict | None = None  # the settings the last analysis was asked at (a field left as it was
        # analysed is not analysed again when it loses the focus)
        self.jobs = PaneJobs(self)

    def compose(self) -> ComposeResult:
        yield Input(placeholder="/ type to filter models…", id="model-filter", compact=True)
        yield OptionList(Option("loading…", disabled=True), id="model-list", compact=True)
        yield Input(placeholder="custom package.module:factory ⏎", id="custom-model", compact=True)
        with Horizontal(id="shape-row"):
            yield Label("input", classes="field-label")
            yield Input(placeholder=SHAPE_EXAMPLE, id="shape", compact=True)
            yield Label("batch", classes="field-label")
            yield Input("1", id="batch", compact=True, type="integer")
        yield ArgsRow(id="args-row")
        with Horizontal(id="dtype-row"):
            dtype, channels_last = run_option("dtype"), run_option("channels_last")
            yield ExitSafeSelect([(d, d) for d in dtype.choices], value=dtype.default, allow_blank=False,
                                 id="dtype", compact=True, tooltip=dtype.help)
            yield Checkbox(channels_last.label, id="channels-last", compact=True, tooltip=channels_last.help)
        note = Static("", id="dtype-note", classes="dim-note")
        note.display = False
        yield note
        # A custom model that declares no input shape: the shape in the field is a guess, said beside it (not in a
        # toast over the panes); the whole sentence is the tooltip.
        assumed = Static("", id="input-note", classes="warn-note")
        assumed.display = False
        yield assumed

    def on_mount(self) -> None:
        # Mounted lazily, after the screen chose its focus: start in the list (arrows browse, keys work).
        focused = self.screen.focused
        if focused is None or not focused.is_mounted or type(focused).__name__ in ("Tabs", "ContentTabs"):
            self.query_one("#model-list", OptionList).focus()

    # -- catalogue -----------------------------------------------------------------------
    def load_catalogue(self) -> None:
        self.jobs.start("catalogue", {}, "listing the models", enforce_cancel=False)

    @on(JobEvent)
    def _job_event(self, message: JobEvent) -> None:
        event = self.jobs.accept(message)
        if event is None:
            return
        failed = isinstance(event, JobFailed)
        if message.slot == "catalogue":
            if not failed:
                self.set_catalogue(event.result)
            self.post_message(self.CatalogueReady(event.error if failed else None))
        elif failed:
            self._failed(self.model, event.error)
        else:
            self.complexity = event.result
            self.set_default_shape(tuple(event.result.input_shape)[1:])
            if self._analysed is not None:  # the default shape shown is what was analysed
                self._analysed = {**self._analysed, "shape": self.settings()["shape"]}
            if getattr(event.result, "example_inputs", False):  # no shape: the factory makes its inputs
                self.query_one("#shape", Input).placeholder = "example_inputs"
            self.show_default_seq_len(tuple(event.result.input_shape))
            if event.extra.get("input_note"):  # kept until a shape is typed or another model chosen
                self.show_input_note(event.extra["input_note"])
            self.post_message(self.Analysed(self.model, event.result))

    def _failed(self, model: str, error: str) -> None:
        self.post_message(self.Failed(model, error))

    def set_catalogue(self, entries: list) -> None:
        self._entries = list(entries)
        self._index = CatalogueIndex(self._entries)
        self._options = {}
        self._refilter(self.query_one("#model-filter", Input).value)

    def matching(self, text: str) -> list:
        """The entries matching `text` (letters in order; a leading 'hf:' or 'timm:' narrows to that source), in
        the order the list shows them, none left out."""
        return [entry for group in self._index.filter(text) for entry in group.entries]

    def _refilter(self, text: str) -> None:
        """The list for the filter's text: a heading per group, at most MAX_PER_GROUP entries under it and a line
        saying how many more match (a keystroke stays well under 50 ms over ~2,300 names), the best match
        highlighted, so ⏎ in the filter chooses it."""
        options: list[Option] = []
        best: tuple[float, int] | None = None
        for group in self._index.filter(text):
            options.append(Option(Content.styled(group.title, "bold"), disabled=True))
            for entry, score in zip(group.entries[:MAX_PER_GROUP], group.scores):
                if entry.supported and (best is None or score > best[0]):
                    best = (score, len(options))
                options.append(self._option(entry))
            more = len(group.entries) - MAX_PER_GROUP
            if more > 0:
                options.append(Option(Content.styled(f"… {more:,} more: type to narrow", "dim"), disabled=True))
        listing = self.query_one("#model-list", OptionList)
        listing.clear_options()
        if options:
            listing.add_options(options)
            listing.highlighted = best[1] if best is not None else None
        elif self._entries:
            listing.add_option(Option("no model matches; try module:factory below", disabled=True))

    def _option(self, entry) -> Option:
        """The entry's option: its name with a source's prefix dimmed (the heading names the source too), and why
        it cannot be chosen when it cannot. Kept for the next keystroke: an option lays out its prompt once."""
        option = self._options.get(entry.name)
        if option is None:
            # Content, not markup: a keystroke that lists ~150 names not listed before parses none of them.
            bare = bare_name(entry.name)
            prefix = entry.name[:len(entry.name) - len(bare)]
            parts: list = [(prefix, "dim"), bare] if prefix else [bare]
            if not entry.supported:
                parts.append((f" ({entry.reason})", "dim"))
            option = Option(Content.assemble(*parts), id=entry.name, disabled=not entry.supported)
            self._options[entry.name] = option
        return option

    @on(Input.Changed, "#model-filter")
    def _filter_changed(self, event: Input.Changed) -> None:
        event.stop()
        self._refilter(event.value)

    @on(Input.Submitted, "#model-filter")
    def _filter_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        listing = self.query_one("#model-list", OptionList)
        if listing.highlighted is not None:
            option = listing.get_option_at_index(listing.highlighted)
            if option.id and not option.disabled:
                self.choose(option.id)
                listing.focus()  # chosen: the next key (r, a tab's number) is a command, not more filter text
                return
        text = event.value.strip()
        if text:
            # Nothing in the catalogue: let the engine resolve it (and suggest close matches).
            self.choose(text)
            listing.focus()  # as for a listed model: r runs it

    def on_key(self, event) -> None:
        # Down from the filter moves into the list, as in a search box.
        if event.key == "down" and self.screen.focused is self.query_one("#model-filter"):
            event.stop()
            self.query_one("#model-list", OptionList).focus()

    @on(OptionList.OptionSelected, "#model-list")
    def _option_selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        if event.option.id:
            self.choose(event.option.id)

    @on(Input.Submitted, "#custom-model")
    def _custom_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        if event.value.strip():
            self.choose(event.value.strip())
            self.query_one("#model-list", OptionList).focus()  # chosen: r runs it, it is not typed

    def choose(self, model: str) -> None:
        """Choose a model and analyse it at the input typed: another model starts from its default input, or the
        args, seq and shape it was left with (ArgsRow.switch); the last model's are kept with it."""
        if not self.app.session.has("inputs"):
            self.app.notify("the model registry is still loading", severity="warning")
            return
        if model != self.model:
            field = self.query_one("#shape", Input)
            typed = field.value.strip() if self._shape_typed or self._shape_given else ""
            shape = self.query_one(ArgsRow).switch(self.model, model, typed)
            self.set_default_shape(())
            with field.prevent(Input.Changed):
                field.value = shape  # as the user typed it for this model ('': its default)
            self._shape_given = bool(shape)
            self.query_one("#shape", Input).placeholder = SHAPE_EXAMPLE
            self.query_one("#seq-len", Input).placeholder = SEQ_EXAMPLE
            self.show_input_note(None)
        self.model = model
        self._highlight(model)
        self._analyse()

    def _highlight(self, model: str) -> None:
        """The list's highlight on the chosen model (also one chosen with --model, typed, or by the demo). A
        catalogue model the list does not show (past a group's first MAX_PER_GROUP, or filtered out) is filtered
        for, so the list shows it highlighted; a model outside the catalogue (module:factory) leaves nothing
        highlighted: the highlight never rests on a model that is not the one chosen."""
        listing = self.query_one("#model-list", OptionList)
        index = self._listed_at(listing, model)
        if index is None and any(entry.name == model for entry in self._entries):
            field = self.query_one("#model-filter", Input)
            with field.prevent(Input.Changed):
                field.value = model
            self._refilter(model)
            index = self._listed_at(listing, model)
        listing.highlighted = index

    @staticmethod
    def _listed_at(listing: OptionList, model: str) -> int | None:
        return next((i for i in range(listing.option_count) if listing.get_option_at_index(i).id == model), None)

    def _analyse(self) -> None:
        """FLOPs, parameters and the layer table on the meta device, in the measurement process; a newer
        request replaces one still waiting, and one still running is cancelled: a model whose build or forward
        blocks is killed with its process after the grace (measure/client.py), so the next model is analysed."""
        self.complexity = None
        model = self.model
        self._analysed = self.settings()
        self.post_message(self.Analysing(model))
        try:
            params = self.screen.selection().analysis_params()  # the sidebar's choice, frozen, as jobs get it
        except Exception as exc:
            self.jobs.cancel("analyse")
            self._failed(model, app_message(exc))
            return
        self.jobs.start("analyse", params, f"analysing {model}")

    # -- input settings ------------------------------------------------------------------
    def set_default_shape(self, shape: tuple) -> None:
        """Fill the shape field (without batch) from the chosen model's catalogue entry."""
        field = self.query_one("#shape", Input)
        with field.prevent(Input.Changed):
            field.value = format_shape(shape)
        if shape:  # greyed while the field is empty again (another length or override being analysed, or refused)
            field.placeholder = format_shape(shape)
        self._shape_typed = False

    def set_inputs(self, model_args: str = "", seq_len: str = "") -> None:
        """The args and seq fields as if typed (the app's --model-args and --seq-len), before a model is chosen:
        they are the first model's, and kept with it."""
        self.query_one(ArgsRow).fill(model_args, seq_len)

    def show_default_seq_len(self, input_shape: tuple) -> None:
        self.query_one("#seq-len", Input).placeholder = seq_placeholder(self.model, input_shape)

    @on(Input.Changed, "#shape")
    def _shape_edited(self, event: Input.Changed) -> None:
        self._shape_typed = True

    def reanalyse(self) -> None:
        """Analyse the chosen model again (the step changed: a training step's backward is counted too)."""
        if self.model is not None:
            self._analyse()

    @on(Input.Submitted, "#shape, #batch, #model-args, #seq-len")
    @on(Input.Blurred, "#shape, #batch, #model-args, #seq-len")
    @on(Select.Changed, "#dtype")
    @on(Checkbox.Changed, "#channels-last")
    def _settings_changed(self, event) -> None:
        event.stop()
        typed = isinstance(event, (Input.Submitted, Input.Blurred))
        if isinstance(event, Input.Blurred) and self.settings() == self._analysed:
            return  # left as it was analysed: nothing to do again
        if typed and event.input.id == "shape":
            self.show_input_note(None)  # a shape typed is not assumed
            self._shape_given = bool(event.value.strip())
        if typed and event.input.id in ("model-args", "seq-len") and not self._shape_typed:
            # The shape shown is the model's default at the old overrides and length: the new ones decide it
            # (a timm img_size, a sequence length); the analysis fills it in again.
            self.set_default_shape(())
            self._shape_given = False
        self.update_dtype_note()
        if self.model is not None:
            self._analyse()
        if isinstance(event, Input.Submitted):
            # as for a chosen model: ⏎ sets the field, and the next key (r, a tab's number) is a command
            self.query_one("#model-list", OptionList).focus()

    def show_input_note(self, note: str | None) -> None:
        """Say the input shape is assumed (the model declares none), or nothing once a shape was given."""
        widget = self.query_one("#input-note", Static)
        shape = self.query_one("#shape", Input).value.strip()
        widget.update(f"input {shape} assumed: the model declares no input_shape" if note else "")
        widget.tooltip = note
        widget.display = bool(note)

    def update_dtype_note(self) -> None:
        """The dtype's note for the device runs go to (called again when the device is known or changes)."""
        note = self.query_one("#dtype-note", Static)
        text = dtype_note(self.settings()["dtype"], self.app.session.device_kind())
        note.update(text)
        note.display = bool(text)

    def settings(self) -> dict:
        """The raw input settings as typed; the engine parses and validates them."""
        batch_text = self.query_one("#batch", Input).value.strip() or "1"
        dtype = self.query_one("#dtype", Select).value
        return {
            "shape": self.query_one("#shape", Input).value.strip(),
            "batch": batch_text,
            "dtype": dtype if isinstance(dtype, str) else "float32",
            "channels_last": self.query_one("#channels-last", Checkbox).value,
            **self.query_one(ArgsRow).values(),
        }
