"""A user factory's own inputs: `example_inputs(batch, device, dtype)` on the factory (or the class), returning a
tensor, a tuple of tensors (positional arguments) or a dict of tensors (keyword arguments); and what they are, in
words, for every result's heading (`describe_example_inputs`: each tensor's name, shape and dtype).

Whatever it does wrong is one line: it raising, ending the program, or returning something that is not tensors.
"""

from __future__ import annotations

import inspect
from typing import Any

from torchperf_tui.core.errors import ModelError, first_line
from torchperf_tui.engine.workloads.model_inputs import ModelInputs
from torchperf_tui.core.formatting import format_shape
from torchperf_tui.engine.workloads.factories import load_factory
from torchperf_tui.engine.workloads.inputs import dtype_name

ATTRIBUTE = "example_inputs"


def has_example_inputs(factory: Any, spec: str = "the factory") -> bool:
    """Whether `factory` (`spec`'s) makes its own inputs. An example_inputs that is there and is not a function
    (`example_inputs = (1, 3, 32, 32)`) is ModelError in one line, not passed over for the default input."""
    try:
        make = getattr(factory, ATTRIBUTE, None)
    except Exception as exc:  # noqa: BLE001 - a property of the user's that raises: one line
        raise ModelError(f"{spec}.{ATTRIBUTE} raised {type(exc).__name__}: {first_line(exc)}") from None
    if make is None:
        return False
    if not callable(make):
        raise ModelError(f"{spec}.{ATTRIBUTE} is a {type(make).__name__}, not a function: define it as "
                         f"{ATTRIBUTE}(batch, device, dtype) returning the inputs, or remove it")
    return True


def call_example_inputs(spec: str, batch: int, device, dtype) -> ModelInputs:
    """`spec`'s example_inputs(batch, device, dtype) as the arguments of one call, checked."""
    import torch

    make = getattr(load_factory(spec), ATTRIBUTE, None)
    if not callable(make):
        raise ModelError(f"{spec} has no {ATTRIBUTE}(batch, device, dtype)")
    try:
        value = make(batch, torch.device(device), dtype if dtype is not None else torch.float32)
    except SystemExit as exc:
        raise ModelError(f"{spec}.{ATTRIBUTE} called sys.exit({exc.code!r})") from None
    except Exception as exc:  # noqa: BLE001 - the user's function failing is one line
        raise ModelError(f"{spec}.{ATTRIBUTE}({batch}, ...) raised {type(exc).__name__}: {first_line(exc)}") from None
    return as_model_inputs(spec, value)


def describe_example_inputs(spec: str, batch: int, dtype=None, model: Any = None) -> str:
    """'example_inputs at batch 2: image 2x3x8x8 float32, extra 2x5 float32': what `spec`'s example_inputs makes at
    `batch` in `dtype`, each tensor by name: a keyword's own, a positional one's the forward parameter it goes to (of
    `model`, else of the class the factory is or says it returns), else its place (arg0, arg1). Made on the meta
    device (shapes, no memory: a large batch costs nothing), on the CPU where the user's code cannot make them there.
    ModelError when example_inputs fails."""
    try:
        made = call_example_inputs(spec, batch, "meta", dtype)
    except ModelError:
        made = call_example_inputs(spec, batch, "cpu", dtype)
    names = positional_names(spec, len(made.args), model)
    named = [*zip(names, made.args), *made.kwargs.items()]
    return f"example_inputs at batch {batch}: " + ", ".join(
        f"{name} {format_shape(tuple(t.shape))} {dtype_name(t.dtype)}" for name, t in named)


def positional_names(spec: str, count: int, model: Any = None) -> list[str]:
    """The names of a forward's first `count` positional parameters (see describe_example_inputs); 'argN' where
    they cannot be read without building the model."""
    forward = getattr(model, "forward", None)
    if forward is None:
        factory = load_factory(spec)
        try:
            cls = factory if isinstance(factory, type) else inspect.signature(factory).return_annotation
        except (TypeError, ValueError):  # a callable without a signature Python can read
            cls = None
        forward = getattr(cls, "forward", None) if isinstance(cls, type) else None
    try:
        parameters = list(inspect.signature(forward).parameters.values()) if forward is not None else []
    except (TypeError, ValueError):
        parameters = []
    positional = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    names = [p.name for p in parameters if p.kind in positional and p.name != "self"]
    return [names[i] if i < len(names) else f"arg{i}" for i in range(count)]


def as_model_inputs(spec: str, value: Any) -> ModelInputs:
    """A tensor, a tuple or list of tensors, or a dict of str to tensors as a call's arguments; ModelError else."""
    import torch

    def bad(what: str) -> ModelError:
        return ModelError(f"{spec}.{ATTRIBUTE} must return a tensor, a tuple of tensors or a dict of tensors; "
                          f"it returned {what}"[:300])

    if isinstance(value, torch.Tensor):
        inputs = ModelInputs((value,))
    elif isinstance(value, (tuple, list)):
        inputs = ModelInputs(tuple(value))
    elif isinstance(value, dict):
        if not all(isinstance(k, str) and k.isidentifier() for k in value):
            raise bad("a dict whose keys are not all argument names")
        inputs = ModelInputs((), value)
    else:
        raise bad(type(value).__name__)
    if not inputs.tensors():
        raise bad("no tensors")
    for t in inputs.tensors():
        if not isinstance(t, torch.Tensor):
            raise bad(f"a {type(t).__name__} among them")
    batches = {t.shape[0] if t.dim() else None for t in inputs.tensors()}
    if None in batches:
        raise bad("a tensor without a batch dimension (0-d)")
    return inputs
