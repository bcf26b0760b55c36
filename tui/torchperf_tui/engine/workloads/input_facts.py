"""What a result's model was fed beyond its main input's shape, kept with every result and its history record.

Plain data (no torch): the app's UI process reads results.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from torchperf_tui.core.errors import ModelError
from torchperf_tui.engine.workloads.example_inputs import describe_example_inputs
from torchperf_tui.engine.workloads.inputs import parse_dtype
from torchperf_tui.engine.workloads.model_args import format_model_args


@dataclass
class InputFacts:
    """The model's overrides as typed, a token model's sequence length, and its inputs in words when they are not
    one float tensor (InputSpec.describe). Keyword-only, so every result dataclass can carry them last."""

    model_args: str = field(default="", kw_only=True)
    seq_len: int | None = field(default=None, kw_only=True)
    inputs: str = field(default="", kw_only=True)
    # A user factory's example_inputs made them (`inputs` lists each: name, shape, dtype): no input shape is assumed.
    example_inputs: bool = field(default=False, kw_only=True)


@dataclass
class RecordedPasses(InputFacts):
    """A few passes of one model recorded whole (a profile, a memory snapshot): the model, where it ran and on what."""

    model: str
    device: str
    input_shape: tuple[int, ...]
    dtype: str
    iters: int  # iterations recorded (fewer than asked when cancelled)


class PromptInput:
    """A generation's main input is its prompt's token ids: `input_shape` is (batch, prompt_len) (a mixin of the
    generation results, which have both fields)."""

    @property
    def input_shape(self) -> tuple[int, ...]:
        return (self.batch, self.prompt_len)


def input_facts(inputs, model_args: tuple = (), dtype: str | None = None, model=None) -> dict:
    """The InputFacts of a result whose model had the overrides `model_args` and was fed `inputs` (an InputSpec); a
    factory's example_inputs listed as made in `dtype` (each tensor's name, from `model`'s forward when given)."""
    return {"model_args": format_model_args(model_args), "seq_len": inputs.seq_len,
            "inputs": "" if inputs.simple else _described(inputs, dtype, model),
            "example_inputs": inputs.factory is not None}


def _described(inputs, dtype: str | None, model) -> str:
    """InputSpec.describe, and for a factory's example_inputs each tensor they make (the run made them already: a
    failure here falls back to naming the factory)."""
    if inputs.factory is None:
        return inputs.describe()
    try:
        return describe_example_inputs(inputs.factory, inputs.batch, parse_dtype(dtype or "float32"), model)
    except ModelError:
        return inputs.describe()
