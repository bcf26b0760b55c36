"""Models by name, from four sources: a torchvision name (its catalogue: engine/workloads/model_catalogue.py),
`timm:NAME` (engine/workloads/timm_models.py), `hf:TYPE` or `hf:DIRECTORY` (engine/workloads/hf_models.py), or a
user's `module:factory`; resolved to its entry, its inputs made (InputSpec), and built with random weights, on a
device or on meta (engine/workloads/meta_build.py). Whether a model's weights fit the device is told from a
meta build, before anything is allocated (engine/workloads/model_fit.py).

Nothing here downloads anything: every torchvision builder is called with `weights=None` (and
`weights_backbone=None` where it has one), timm's with `pretrained=False`, transformers' from a config.
"""

from __future__ import annotations

import contextlib
import difflib
from typing import Any

import torch
from torch import nn

from torchperf_tui.engine.workloads.example_inputs import has_example_inputs
from torchperf_tui.core.formatting import format_shape
from torchperf_tui.core.errors import ModelError, Remedy, ShapeError, first_line
from torchperf_tui.engine.workloads.factories import SPEC_FORMS, cwd_importable, is_custom, load_factory
from torchperf_tui.engine.workloads.input_spec import InputSpec
from torchperf_tui.engine.workloads.meta_build import parameters_on_meta
from torchperf_tui.engine.workloads.model_source import PREFIXES, SOURCES, source_of  # noqa: F401 - part of this module's API
from torchperf_tui.engine.workloads.model_args import ModelArgs
from torchperf_tui.engine.workloads.model_catalogue import (LISTED_SOURCES, catalogue_entry, list_models,
                                                            torchvision_tasks)
from torchperf_tui.engine.workloads.model_entry import ModelEntry
from torchperf_tui.engine.workloads.torchvision_models import DetectionAdapter, OpticalFlowAdapter, torchvision_kwargs
from torchperf_tui.engine.workloads.torchvision_models import build as _build_torchvision
from torchperf_tui.engine.workloads.inputs import check_dims
from torchperf_tui.engine.workloads import hf_models, timm_models

# What a caller takes from here, whichever module of engine/workloads/ it lives in.
__all__ = [
    "CUSTOM_DEFAULT_SHAPE", "LISTED_SOURCES", "SOURCES", "DetectionAdapter", "OpticalFlowAdapter", "build_model",
    "default_input_shape", "input_shape_note", "input_spec_for", "list_models", "load_factory",
    "resolve_model", "source_of", "torchvision_kwargs",
]

# Shape given to a custom model whose factory does not say (a factory may carry `input_shape`).
CUSTOM_DEFAULT_SHAPE: tuple[int, ...] = (3, 224, 224)



# --------------------------------------------------------------------------------------------------
# Resolving a spec


def _suggest(name: str) -> str:
    names = list(torchvision_tasks())
    close = _other_source_names(name) + difflib.get_close_matches(name, names, n=3, cutoff=0.6)
    if close:
        return f"unknown model {name!r}; did you mean {', '.join(close)}?"
    return f"unknown model {name!r}; see the model list, or give your own as package.module:factory"


def _other_source_names(name: str) -> list[str]:
    """`name` as a timm or transformers model (an unprefixed name is torchvision's): 'timm:resnet18d', 'hf:llama'."""
    found = []
    with contextlib.suppress(ModelError):
        if name in timm_models.model_names():
            found.append(timm_models.PREFIX + name)
    with contextlib.suppress(ModelError):
        if name in hf_models.model_types():
            found.append(hf_models.PREFIX + name)
    return found


def resolve_model(spec: str, model_args: ModelArgs = ()) -> ModelEntry:
    """A spec of any source -> its ModelEntry (name, task, default input shape without the batch, source).

    torchvision: its name (case-insensitive), task and default input. timm: `timm:NAME` (task "classification",
    the input size of its pretrained config). hf: `hf:TYPE` / `hf:DIRECTORY`, task its head ("causal-lm" or
    "base"), the input its main tensor's shape (token models: the default sequence length). The overrides are
    checked here, so a bad key fails early. A custom factory is imported here, so a bad path fails early; its
    default input shape is the `input_shape` of the factory or class, else of the model it builds (built on meta,
    only when the factory carries none), else CUSTOM_DEFAULT_SHAPE (input_shape_note says so).
    """
    spec = (spec or "").strip()
    if not spec:
        raise ModelError(f"no model given: give {SPEC_FORMS}")
    source = source_of(spec)
    if source == "hf":
        config = hf_models.load_config(spec, model_args)
        inputs = hf_models.input_spec(config, batch=1, seq_len=None)
        return ModelEntry(hf_models.label(config), hf_models.head(config), inputs.sample_shape, source="hf")
    if source == "timm":
        name = timm_models.check_name(spec)
        timm_models.builder_kwargs(name, model_args)  # a bad override fails here
        return ModelEntry(timm_models.PREFIX + name, "classification", timm_models.input_shape(name, model_args),
                          source="timm")
    if source == "custom":
        _refuse_custom_args(spec, model_args)
        factory = load_factory(spec)
        return ModelEntry(spec, "custom", _factory_input_shape(spec, factory, instance=True), source="custom")
    name = spec.lower()
    task = torchvision_tasks().get(name)
    if task is None:
        raise ModelError(_suggest(name))
    if model_args:
        torchvision_kwargs(name, model_args)  # a bad override fails here
    return catalogue_entry(name, task)


def _refuse_custom_args(spec: str, model_args: ModelArgs) -> None:
    if model_args:
        raise ModelError(f"{spec} is built by its own factory: model arguments are for torchvision, timm: and hf: "
                         "models", remedies=(Remedy("model_args", action="clear"),))


def _declared_input_shape(spec: str, factory: Any, instance: bool) -> Any:
    """What the user's code says its input is (None: nothing): the factory's or class's `input_shape`, else,
    with `instance`, that of the model it builds (a class that sets `self.input_shape` in `__init__`, a factory
    whose module carries one), read from a build on the meta device (no weight memory). A build that fails
    here says nothing: the real build reports it."""
    shape = getattr(factory, "input_shape", None)
    if shape is not None or not instance:
        return shape
    try:
        with parameters_on_meta():
            model = _build_custom(spec)
    except Exception:  # noqa: BLE001 - the measuring build says what is wrong with the factory
        return None
    shape = getattr(model, "input_shape", None)
    return shape if isinstance(shape, (tuple, list)) else None  # a buffer or method of that name is not one


def _factory_input_shape(spec: str, factory: Any, instance: bool = False) -> tuple[int, ...]:
    """The `input_shape` the user's code declares (no batch dimension; see _declared_input_shape), checked as
    a typed shape is, else CUSTOM_DEFAULT_SHAPE (input_shape_note says so)."""
    shape = _declared_input_shape(spec, factory, instance)
    if shape is None:
        return CUSTOM_DEFAULT_SHAPE
    if not isinstance(shape, (tuple, list)) or not shape or not all(
            isinstance(d, int) and not isinstance(d, bool) for d in shape):
        raise ModelError(f"{spec}: its input_shape must be a tuple of whole numbers without the batch, "
                         f"e.g. (3, 224, 224); it is {shape!r}"[:300])
    try:
        return check_dims((1, *shape))[1:]
    except ShapeError as exc:
        raise ModelError(f"{spec}: its input_shape {tuple(shape)}: {exc}") from None


def input_shape_note(spec: str) -> str | None:
    """A line when `spec`'s input shape is assumed (a custom model that declares none), else None: none for a factory
    whose example_inputs makes its inputs (nothing is assumed; the result lists them)."""
    if not is_custom((spec or "").strip()):
        return None
    factory = load_factory(spec.strip())
    if has_example_inputs(factory) or _declared_input_shape(spec.strip(), factory, instance=True) is not None:
        return None
    return (f"{spec.strip()} does not say its input shape (no input_shape on the factory, its class or the model "
            f"it builds): assumed {format_shape(CUSTOM_DEFAULT_SHAPE)} without the batch; give the shape, "
            f"or set input_shape = (3, 224, 224) there")


def input_spec_for(spec: str, *, batch: int, input_shape: tuple[int, ...] | None = None,
                   seq_len: int | None = None, model_args: ModelArgs = ()) -> InputSpec:
    """What `spec` is fed at `batch`: `input_shape` (typed, with the batch) replaces the main input's shape, else
    the model's default.

    hf: its own inputs (engine/workloads/hf_models.input_spec: token ids with their mask, decoder ids, pixel values,
    audio features), `seq_len` its sequence length. A custom factory with `example_inputs(batch, device, dtype)`:
    those (InputSpec((batch,), factory=spec)). Every other model takes one float tensor, and no sequence length.
    """
    spec = (spec or "").strip()
    source = source_of(spec)
    if source == "hf":
        config = hf_models.load_config(spec, model_args)
        return hf_models.input_spec(config, batch=batch, seq_len=seq_len, input_shape=input_shape)
    if source == "custom":
        _refuse_custom_args(spec, model_args)
        if has_example_inputs(load_factory(spec), spec):
            if seq_len is not None:
                raise ShapeError(f"{spec} makes its own inputs (example_inputs): a sequence length does not apply")
            return InputSpec((batch,), factory=spec)
    if input_shape is not None:
        shape = check_dims((batch, *tuple(input_shape)[1:]))
    else:
        shape = check_dims(default_input_shape(spec, batch=batch, model_args=model_args))
    if seq_len is not None:
        raise ShapeError(f"{spec} takes an image-like tensor ({format_shape(shape[1:])} without the batch), not "
                         f"token ids: a sequence length does not apply; give an input shape instead")
    return InputSpec(shape)


def default_input_shape(spec: str, batch: int = 1, model_args: ModelArgs = ()) -> tuple[int, ...]:
    """The model's default input with a batch dimension in front, e.g. (1, 3, 224, 224); (1, 128) for a token
    model (its main input: token ids)."""
    return (batch, *resolve_model(spec, model_args).input_shape)


# --------------------------------------------------------------------------------------------------
# Building

def _build_custom(spec: str) -> nn.Module:
    factory = load_factory(spec)
    try:
        with cwd_importable():
            model = factory()
    except SystemExit as exc:
        raise ModelError(f"{spec!r} called sys.exit({exc.code!r}) while building the model") from None
    except Exception as exc:  # noqa: BLE001 - the user's factory failing is a one-line ModelError
        raise ModelError(f"{spec!r} raised {type(exc).__name__}: {first_line(exc)}") from None
    if not isinstance(model, nn.Module):
        raise ModelError(f"{spec!r} returned {type(model).__name__}, not a torch.nn.Module")
    return model


def _resolve_for_build(spec: str) -> ModelEntry:
    """resolve_model without reading a custom model's shape from a build of it: build_model builds it anyway."""
    spec = (spec or "").strip()
    if spec and is_custom(spec):
        return ModelEntry(spec, "custom", CUSTOM_DEFAULT_SHAPE, source="custom")  # the shape is not used to build
    return resolve_model(spec)


def build_model(spec: str, device: str | torch.device = "cpu", *, builder_kwargs: dict[str, Any] | None = None,
                model_args: ModelArgs = (), dtype: torch.dtype | None = None, attn: str | None = None) -> nn.Module:
    """Build a model with random weights (weights=None, pretrained=False, from a config) in eval mode.

    device="meta" builds only the structure (no weight memory; for complexity analysis and the footprint).
    hf: and timm: models are built on the device itself, hf: directly in `dtype` (float32 when None); torchvision
    and custom models build on the CPU and move, then take `dtype` when given. `builder_kwargs` go to a
    torchvision builder (e.g. image_size for ViT); `model_args` (checked) to the torchvision or timm builder, or
    into the transformers config. `attn`: a transformers model's attention implementation (None: its default).
    """
    spec = (spec or "").strip()
    source = source_of(spec)
    device = torch.device(device)
    if source == "hf":
        config = hf_models.load_config(spec, model_args)
        return hf_models.build(config, dtype or torch.float32, device, attn=attn)
    if source == "timm":
        model = timm_models.build(spec, model_args, device)
        return model.to(dtype) if dtype is not None else model
    if source == "custom":
        _refuse_custom_args(spec, model_args)
    entry = _resolve_for_build(spec)
    if not entry.supported:
        raise ModelError(f"{entry.name} is not supported: {entry.reason}")
    kwargs = dict(builder_kwargs or {})
    if entry.task != "custom" and model_args:
        kwargs.update(torchvision_kwargs(entry.name, model_args))
    meta = device.type == "meta"
    with parameters_on_meta() if meta else contextlib.nullcontext():
        if entry.task == "custom":
            model = _build_custom(spec)
        else:
            try:
                model = _build_torchvision(entry.name, entry.task, kwargs)
            except (TypeError, ValueError, NotImplementedError, AssertionError) as exc:
                # The builder refusing its keywords (replace_stride_with_dilation=[True,...] on a BasicBlock:
                # NotImplementedError) is bad input, said in one line.
                raise ModelError(f"cannot build {entry.name}: {first_line(exc)}") from None
    if meta:
        # A custom factory may create tensors outside register_parameter (e.g. load a state dict):
        # move whatever is left so the whole module is on meta.
        model = model.to("meta")
    elif device.type != "cpu":
        model = model.to(device)
    if dtype is not None:
        model = model.to(dtype)
    return model.eval()
