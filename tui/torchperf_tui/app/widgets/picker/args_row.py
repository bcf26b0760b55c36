"""The picker's row for a model's overrides and sequence length (args, seq): typed by the user, or filled by the app
from its --model-args and --seq-len (and the demo's small config) before a model is chosen. They are the model's
they were typed for: kept with it when another is chosen, and back when it is chosen again (model_fields.py)."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.widgets import Input, Label

from torchperf_tui.app.widgets.picker.model_fields import FieldsPerModel, ModelFields

ARGS_TOOLTIP = ("The model's overrides, KEY=VALUE,...: num_hidden_layers=2 (transformers), depth=6 (a timm ViT), or "
                "a custom factory's keyword arguments. ⏎ analyses it again.")
SEQ_TOOLTIP = "A token model's sequence length (empty: its default, shown greyed). ⏎ analyses it again."
SEQ_EXAMPLE = "128"  # the seq field's placeholder until a token model's analysis gives its own default


class ArgsRow(Horizontal):
    """args KEY=VALUE,… and seq N: their values as typed (the engine parses and checks them), per model."""

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.kept = FieldsPerModel()  # what each model was left with

    def compose(self) -> ComposeResult:
        yield Label("args", classes="field-label")
        yield Input(placeholder="KEY=VALUE,…", id="model-args", compact=True, tooltip=ARGS_TOOLTIP)
        yield Label("seq", classes="field-label")
        yield Input(placeholder=SEQ_EXAMPLE, id="seq-len", compact=True, type="integer", tooltip=SEQ_TOOLTIP)

    def values(self) -> dict[str, str]:
        return {"model_args": self.query_one("#model-args", Input).value.strip(),
                "seq_len": self.query_one("#seq-len", Input).value.strip()}

    def switch(self, left: str | None, chosen: str, shape: str) -> str:
        """Another model: keep the fields as `left` (None: no model yet) was left, with the `shape` typed for it, and
        fill in `chosen`'s; -> the shape typed for `chosen` ('': its default). Those filled or typed before the
        first model is chosen are that model's."""
        if left is None:
            return shape  # typed before any model: the first one's, as args and seq are
        self.kept.keep(left, ModelFields(**self.values(), shape=shape))
        fields = self.kept.recall(chosen)
        self.fill(fields.model_args, fields.seq_len)
        return fields.shape

    def fill(self, model_args: str = "", seq_len: str = "") -> None:
        """Show these values as if typed, without posting Changed: the model chosen next is analysed with them."""
        for field_id, value in (("#model-args", model_args), ("#seq-len", seq_len)):
            field = self.query_one(field_id, Input)
            with field.prevent(Input.Changed):
                field.value = value
