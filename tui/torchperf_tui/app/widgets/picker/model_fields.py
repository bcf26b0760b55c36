"""What the user typed for one model, kept per model: its overrides (args), its sequence length (seq) and an input
shape typed for it. They belong to the model they were typed for: another model starts from its own defaults (an
llama's num_hidden_layers=2 would make every resnet18 run fail), and coming back to a model brings its fields
back as they were left. No Textual here: the picker reads and fills the fields, this only remembers."""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

KEPT_MODELS = 64  # models whose fields are remembered (the least recently left go first): memory never grows


@dataclass(frozen=True)
class ModelFields:
    """The fields of one model as the user left them; '' is the model's default."""

    model_args: str = ""
    seq_len: str = ""
    shape: str = ""


class FieldsPerModel:
    """The fields typed for each model, by its name, bounded."""

    def __init__(self, limit: int = KEPT_MODELS) -> None:
        self.limit = max(1, limit)
        self._kept: OrderedDict[str, ModelFields] = OrderedDict()

    def keep(self, model: str, fields: ModelFields) -> None:
        """`model` was left with these fields (all defaults: nothing to remember)."""
        self._kept.pop(model, None)
        if fields != ModelFields():
            self._kept[model] = fields
            while len(self._kept) > self.limit:
                self._kept.popitem(last=False)

    def recall(self, model: str) -> ModelFields:
        """The fields `model` was left with, or its defaults."""
        return self._kept.get(model, ModelFields())

    def __len__(self) -> int:
        return len(self._kept)
