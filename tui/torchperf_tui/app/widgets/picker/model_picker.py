"""Model picker: the torchvision catalogue grouped by task with type-to-filter, a custom
module:factory field, and the input settings (shape, batch, dtype, channels_last)."""

from __future__ import annotations

from textual import on
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.widgets import Checkbox, Input, Label, OptionList, Select
from textual.widgets.option_list import Option

from torchperf_tui.app.messages import InputSettingsChanged, ModelChosen

DTYPE_CHOICES = ("float32", "float16", "bfloat16")


class ModelPicker(Vertical):
    """Pick a model and describe its input; posts ModelChosen and InputSettingsChanged."""

    DEFAULT_CSS = """
    ModelPicker { height: auto; }
    ModelPicker #model-list { height: 8; }
    ModelPicker Horizontal { height: auto; }
    """

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self._entries: list = []
        self.chosen: str | None = None

    def compose(self) -> ComposeResult:
        yield Input(placeholder="/ type to filter models…", id="model-filter", compact=True)
        yield OptionList(Option("loading…", disabled=True), id="model-list", compact=True)
        yield Input(placeholder="custom package.module:factory ⏎", id="custom-spec", compact=True)
        with Horizontal(id="shape-row"):
            yield Label("input", classes="field-label")
            yield Input(placeholder="3x224x224", id="shape", compact=True)
            yield Label("batch", classes="field-label")
            yield Input("1", id="batch", compact=True, type="integer")
        with Horizontal(id="dtype-row"):
            yield Select([(d, d) for d in DTYPE_CHOICES], value="float32", allow_blank=False,
                         id="dtype", compact=True)
            yield Checkbox("channels_last", id="channels-last", compact=True)

    def on_mount(self) -> None:
        # Mounted lazily, after the screen chose its focus: start in the list (arrows browse, keys work).
        focused = self.screen.focused
        if focused is None or not focused.is_mounted or type(focused).__name__ in ("Tabs", "ContentTabs"):
            self.query_one("#model-list", OptionList).focus()

    # -- catalogue -----------------------------------------------------------------------
    def set_catalogue(self, entries: list) -> None:
        self._entries = list(entries)
        self._refilter(self.query_one("#model-filter", Input).value)

    def matching(self, text: str) -> list:
        """Entries whose name contains every word typed (case-insensitive)."""
        words = text.lower().split()
        return [e for e in self._entries if all(w in e.name.lower() for w in words)]

    def _refilter(self, text: str) -> None:
        options: list[Option | None] = []
        task = None
        for entry in self.matching(text):
            if entry.task != task:
                task = entry.task
                options.append(Option(f"── {task} ──", disabled=True))
            if entry.supported:
                options.append(Option(entry.name, id=entry.name))
            else:
                options.append(Option(f"{entry.name} [dim]({entry.reason})[/]", id=entry.name,
                                      disabled=True))
        listing = self.query_one("#model-list", OptionList)
        listing.clear_options()
        if options:
            listing.add_options(options)
            first = next((i for i, o in enumerate(options) if o is not None and not o.disabled), None)
            listing.highlighted = first
        elif self._entries:
            listing.add_option(Option("no model matches; try module:factory below", disabled=True))

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
                return
        text = event.value.strip()
        if text:
            # Nothing in the catalogue: let the engine resolve it (and suggest close matches).
            self.choose(text)

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

    @on(Input.Submitted, "#custom-spec")
    def _custom_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        if event.value.strip():
            self.choose(event.value.strip())

    def choose(self, spec: str) -> None:
        self.chosen = spec
        self.post_message(ModelChosen(spec))

    # -- input settings ------------------------------------------------------------------
    def set_default_shape(self, shape: tuple) -> None:
        """Fill the shape field (without batch) from the chosen model's catalogue entry."""
        field = self.query_one("#shape", Input)
        with field.prevent(Input.Changed):
            field.value = "x".join(str(d) for d in shape)

    @on(Input.Submitted, "#shape, #batch")
    @on(Select.Changed, "#dtype")
    @on(Checkbox.Changed, "#channels-last")
    def _settings_changed(self, event) -> None:
        event.stop()
        self.post_message(InputSettingsChanged())

    def settings(self) -> dict:
        """The raw input settings as typed; the engine parses and validates them."""
        batch_text = self.query_one("#batch", Input).value.strip() or "1"
        dtype = self.query_one("#dtype", Select).value
        return {
            "shape": self.query_one("#shape", Input).value.strip(),
            "batch": batch_text,
            "dtype": dtype if isinstance(dtype, str) else "float32",
            "channels_last": self.query_one("#channels-last", Checkbox).value,
        }
