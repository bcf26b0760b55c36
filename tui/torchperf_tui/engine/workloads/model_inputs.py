"""The arguments of one call of a model, made (engine/workloads/input_spec.py makes them from a description, a
factory's example_inputs from the user's own code)."""

from __future__ import annotations

from typing import Any, Callable

from torchperf_tui.core.formatting import format_shape
from torchperf_tui.engine.workloads.inputs import dtype_name


class ModelInputs:
    """The arguments of one call of a model: positional tensors, then keyword ones. `call(fn)` makes the call."""

    __slots__ = ("args", "kwargs")

    def __init__(self, args: tuple = (), kwargs: dict | None = None) -> None:
        self.args = tuple(args)
        self.kwargs = dict(kwargs or {})

    @classmethod
    def of(cls, made: list[tuple[Any, Any]]) -> ModelInputs:
        """From (TensorSpec, tensor) pairs: a spec without a name is positional."""
        args = tuple(t for spec, t in made if spec.name is None)
        kwargs = {spec.name: t for spec, t in made if spec.name is not None}
        return cls(args, kwargs)

    def call(self, fn: Callable[..., Any]) -> Any:
        return fn(*self.args, **self.kwargs)

    def tensors(self) -> list:
        return [*self.args, *self.kwargs.values()]

    @property
    def first(self):
        """The main input: the first positional tensor, else the first keyword one."""
        return (self.args or tuple(self.kwargs.values()))[0]

    def map(self, fn: Callable[[Any], Any]) -> ModelInputs:
        return ModelInputs(tuple(fn(t) for t in self.args), {k: fn(t) for k, t in self.kwargs.items()})

    def nbytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in self.tensors())

    def describe(self) -> str:
        """'1x3x224x224' for one positional tensor, else each by name: 'input_ids 1x128 int64, attention_mask ...'."""
        if len(self.args) == 1 and not self.kwargs:
            return format_shape(tuple(self.args[0].shape))
        named = [(f"arg{i}", t) for i, t in enumerate(self.args)] + list(self.kwargs.items())
        return ", ".join(f"{name} {format_shape(tuple(t.shape))} {dtype_name(t.dtype)}" for name, t in named)
