"""Models by name: a torchvision name (its catalogue: engine/workloads/model_catalogue.py) or a user's `module:factory`
resolved to its entry, and built with random weights, on a device or on meta (engine/workloads/meta_build.py).

Nothing here downloads anything: every torchvision builder is called with `weights=None` (and
`weights_backbone=None` where it has one).
"""

from __future__ import annotations

import contextlib
import difflib
import importlib
import inspect
import os
import sys
from typing import Any, Iterator

import torch
from torch import nn

from torchperf_tui.formatting import format_shape
from torchperf_tui.engine.errors import ModelError, ShapeError, first_line
from torchperf_tui.engine.workloads.input_spec import InputSpec
from torchperf_tui.engine.workloads.meta_build import parameters_on_meta
from torchperf_tui.engine.workloads.model_catalogue import catalogue_entry, torchvision_tasks
from torchperf_tui.engine.workloads.model_entry import ModelEntry

# Shape given to a custom model whose factory does not say (a factory may carry `input_shape`).
CUSTOM_DEFAULT_SHAPE: tuple[int, ...] = (3, 224, 224)


# --------------------------------------------------------------------------------------------------
# Resolving a spec


def _is_custom(spec: str) -> bool:
    return ":" in spec


def _split_custom(spec: str) -> tuple[str, str]:
    module_name, _, factory_name = spec.strip().partition(":")
    if not module_name or not factory_name:
        raise ModelError(f"malformed model {spec!r}: give a torchvision name or package.module:factory")
    return module_name, factory_name


@contextlib.contextmanager
def _cwd_importable() -> Iterator[None]:
    # A user's `mymodel.py` in the current directory must import even when the app was started as an
    # installed console script (whose sys.path does not hold the current directory).
    cwd = os.getcwd()
    added = cwd not in sys.path and "" not in sys.path
    if added:
        sys.path.insert(0, cwd)
    try:
        yield
    finally:
        if added:
            with contextlib.suppress(ValueError):
                sys.path.remove(cwd)


def load_factory(spec: str):
    module_name, factory_name = _split_custom(spec)
    try:
        with _cwd_importable():
            module = importlib.import_module(module_name)
    except SystemExit as exc:  # the user's module ending the program is its failure, not the app's end
        raise ModelError(f"importing {module_name!r} called sys.exit({exc.code!r})") from None
    except Exception as exc:  # noqa: BLE001 - any import-time failure is the user's, shown as one line
        raise ModelError(f"cannot import {module_name!r}: {first_line(exc)}") from None
    target: Any = module
    for part in factory_name.split("."):
        try:
            target = getattr(target, part)
        except AttributeError:
            raise ModelError(f"module {module_name!r} has no attribute {factory_name!r}") from None
    if not callable(target):
        raise ModelError(f"{spec!r} is not callable (it is {type(target).__name__})")
    return target


def _suggest(name: str) -> str:
    names = list(torchvision_tasks())
    close = difflib.get_close_matches(name, names, n=3, cutoff=0.6)
    if close:
        return f"unknown model {name!r}; did you mean {', '.join(close)}?"
    return f"unknown model {name!r}; see the model list, or give your own as package.module:factory"


def resolve_model(spec: str) -> ModelEntry:
    """A torchvision name (case-insensitive) or `package.module:factory` -> its ModelEntry.

    A custom factory is imported here, so a bad path fails early; its default input shape (no batch dim) is
    the `input_shape` of the factory or class, else of the model it builds (built on meta, only when the
    factory carries none), else CUSTOM_DEFAULT_SHAPE (input_shape_note says so).
    """
    spec = (spec or "").strip()
    if not spec:
        raise ModelError("no model given: give a torchvision name or package.module:factory")
    if _is_custom(spec):
        factory = load_factory(spec)
        return ModelEntry(spec, "custom", _factory_input_shape(spec, factory, instance=True))
    name = spec.lower()
    task = torchvision_tasks().get(name)
    if task is None:
        raise ModelError(_suggest(name))
    return catalogue_entry(name, task)


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
    from torchperf_tui.engine.workloads.inputs import check_dims

    try:
        return check_dims((1, *shape))[1:]
    except ShapeError as exc:
        raise ModelError(f"{spec}: its input_shape {tuple(shape)}: {exc}") from None


def input_shape_note(spec: str) -> str | None:
    """A line when `spec`'s input shape is assumed (a custom model that declares none), else None."""
    if not _is_custom((spec or "").strip()):
        return None
    factory = load_factory(spec.strip())
    if _declared_input_shape(spec.strip(), factory, instance=True) is not None:
        return None
    return (f"{spec.strip()} does not say its input shape (no input_shape on the factory, its class or the model "
            f"it builds): assumed {format_shape(CUSTOM_DEFAULT_SHAPE)} without the batch; give the shape, "
            f"or set input_shape = (3, 224, 224) there")


def input_spec_for(spec: str, *, batch: int, input_shape: tuple[int, ...] | None = None,
                   seq_len: int | None = None, model_args: tuple = ()) -> InputSpec:
    """What `spec` is fed at `batch`: `input_shape` (with the batch) when typed, else the model's default."""
    from torchperf_tui.engine.workloads.inputs import check_dims

    if input_shape is not None:
        return InputSpec(check_dims((batch, *tuple(input_shape)[1:])))
    return InputSpec(check_dims(default_input_shape(spec, batch=batch)))


def default_input_shape(spec: str, batch: int = 1) -> tuple[int, ...]:
    """The model's default input with a batch dimension in front, e.g. (1, 3, 224, 224)."""
    return (batch, *resolve_model(spec).input_shape)


# --------------------------------------------------------------------------------------------------
# Input adapters: models whose forward does not take one batch tensor


class DetectionAdapter(nn.Module):
    """Feeds a torchvision detector a batch tensor (N, 3, H, W) as the list of images it expects."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, images: torch.Tensor):
        return self.model(list(images.unbind(0)))


class OpticalFlowAdapter(nn.Module):
    """Feeds RAFT a batch of frame pairs (N, 2, 3, H, W) as its two image arguments."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, pairs: torch.Tensor):
        if pairs.dim() != 5 or pairs.shape[1] != 2:
            raise ValueError(f"optical flow takes a batch of frame pairs (N, 2, 3, H, W), got {tuple(pairs.shape)}")
        return self.model(pairs[:, 0], pairs[:, 1])


# --------------------------------------------------------------------------------------------------
# Building


def _torchvision_kwargs(name: str, builder) -> dict[str, Any]:
    kwargs: dict[str, Any] = {"weights": None}
    params = inspect.signature(builder).parameters
    if "weights_backbone" in params:
        kwargs["weights_backbone"] = None  # else a detector/segmenter would fetch ImageNet backbone weights
    if name in ("googlenet", "inception_v3"):
        kwargs["init_weights"] = True  # what weights=None does anyway, said explicitly to skip a FutureWarning
    return kwargs


def _build_torchvision(name: str, task: str, builder_kwargs: dict[str, Any]) -> nn.Module:
    import torchvision.models as tvm

    builder = tvm.get_model_builder(name)
    kwargs = _torchvision_kwargs(name, builder)
    kwargs.update(builder_kwargs)
    model = builder(**kwargs)
    if task == "detection":
        return DetectionAdapter(model)
    if task == "optical_flow":
        return OpticalFlowAdapter(model)
    return model


def _build_custom(spec: str) -> nn.Module:
    factory = load_factory(spec)
    try:
        with _cwd_importable():
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
    if spec and _is_custom(spec):
        return ModelEntry(spec, "custom", CUSTOM_DEFAULT_SHAPE)  # the shape is not used to build
    return resolve_model(spec)


def build_model(spec: str, device: str | torch.device = "cpu", *,
                builder_kwargs: dict[str, Any] | None = None, model_args: tuple = (),
                dtype: Any = None) -> nn.Module:
    """Build a model with random weights (weights=None) in eval mode.

    device="meta" builds only the structure (no weight memory; for complexity analysis). Other devices
    build on the CPU and move. `builder_kwargs` go to a torchvision builder (e.g. image_size for ViT).
    """
    entry = _resolve_for_build(spec)
    if not entry.supported:
        raise ModelError(f"{entry.name} is not supported: {entry.reason}")
    device = torch.device(device)
    meta = device.type == "meta"
    with parameters_on_meta() if meta else contextlib.nullcontext():
        if entry.task == "custom":
            model = _build_custom(spec)
        else:
            try:
                model = _build_torchvision(entry.name, entry.task, builder_kwargs or {})
            except TypeError as exc:
                raise ModelError(f"cannot build {entry.name}: {first_line(exc)}") from None
    if meta:
        # A custom factory may create tensors outside register_parameter (e.g. load a state dict):
        # move whatever is left so the whole module is on meta.
        model = model.to("meta")
    elif device.type != "cpu":
        model = model.to(device)
    return model.eval()
