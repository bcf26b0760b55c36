"""The model registry: torchvision's catalogue grouped by task, default input sizes, user `module:factory`.

Nothing here downloads anything: every torchvision builder is called with `weights=None` (and
`weights_backbone=None` where it has one). Reading a weights enum (for its eval crop size and published
`_ops`) only reads Python metadata.
"""

from __future__ import annotations

import contextlib
import difflib
import functools
import importlib
import inspect
import os
import sys
import threading
from typing import Any, Iterator

import torch
from torch import nn
from torch.overrides import TorchFunctionMode

from torchperf_tui.formatting import format_shape
from torchperf_tui.engine.errors import ModelError, ShapeError, first_line
from torchperf_tui.engine.model_entry import ModelEntry, WeightsReference

TASKS: tuple[str, ...] = (
    "classification", "segmentation", "detection", "video", "optical_flow", "quantization", "custom",
)

# Shape given to a custom model whose factory does not say (a factory may carry `input_shape`).
CUSTOM_DEFAULT_SHAPE: tuple[int, ...] = (3, 224, 224)

# Video clips: 16 frames is what torchvision's published `_ops` for the Kinetics weights are measured at.
VIDEO_FRAMES = 16
# Detection models resize every image to their own `min_size` (800 for the R-CNNs) inside the model,
# so the input size mainly matters for the aspect ratio; 800x800 is what they will compute on anyway.
DETECTION_SIZE = {"ssd300_vgg16": 300, "ssdlite320_mobilenet_v3_large": 320,
                  "fasterrcnn_mobilenet_v3_large_320_fpn": 320}
DETECTION_DEFAULT_SIZE = 800
# RAFT downsamples by 8 and builds a 4-level correlation pyramid: sides must be multiples of 8 and the
# coarsest level must not vanish. 520x960 is the Sintel-like size used in torchvision's references.
OPTICAL_FLOW_SHAPE: tuple[int, ...] = (2, 3, 520, 960)

QUANTIZED_REASON = ("int8 quantized kernels run only on CPU backends, cannot run on the meta device and are "
                    "not counted by FlopCounterMode; analyse or time the float model of the same name instead")


# --------------------------------------------------------------------------------------------------
# Catalogue


@functools.lru_cache(maxsize=1)
def _task_by_name() -> dict[str, str]:
    import torchvision.models as tvm

    tasks: dict[str, str] = {}
    for task, module in (("segmentation", tvm.segmentation), ("detection", tvm.detection),
                         ("video", tvm.video), ("optical_flow", tvm.optical_flow),
                         ("quantization", tvm.quantization)):
        for name in tvm.list_models(module=module):
            tasks[name] = task
    # Whatever is left in the full list is an image classifier (tvm.list_models(module=tvm) also lists
    # the sub-packages' models, so classification is "all minus the others").
    for name in tvm.list_models():
        tasks.setdefault(name, "classification")
    return tasks


def _weights_enum(name: str):
    import torchvision.models as tvm

    try:
        return tvm.get_model_weights(name)
    except (ValueError, KeyError):
        return None


def _crop_size(weights) -> tuple[int, int] | None:
    """The eval crop of a weights entry, read from its transforms preset without calling anything heavy."""
    transforms = weights.transforms
    keywords = getattr(transforms, "keywords", None) or {}
    crop = keywords.get("crop_size")
    if crop is None:
        # Some presets hide it: build the preset (no download, just a small object) and read its field.
        try:
            crop = getattr(transforms(), "crop_size", None)
        except Exception:  # noqa: BLE001 - a preset we cannot build tells us nothing; fall back below
            crop = None
    if crop is None:
        return None
    if isinstance(crop, int):
        return crop, crop
    crop = list(crop)
    return (crop[0], crop[0]) if len(crop) == 1 else (crop[0], crop[1])


def _needs_image_size(name: str) -> bool:
    # ViT is built for exactly one image size; its SWAG weights set a larger one through the builder.
    return name.startswith("vit_")


@functools.lru_cache(maxsize=None)
def _default_shape(name: str, task: str) -> tuple[int, ...]:
    if task == "detection":
        side = DETECTION_SIZE.get(name, DETECTION_DEFAULT_SIZE)
        return (3, side, side)
    if task == "optical_flow":
        return OPTICAL_FLOW_SHAPE
    if task == "segmentation":
        return (3, 520, 520)  # the resize size of every torchvision segmentation preset
    weights = _weights_enum(name)
    crops = [c for c in (_crop_size(w) for w in (weights or [])) if c is not None]
    if _needs_image_size(name):
        # weights=None builds the 224 model; the 384/512/518 crops belong to a differently built model.
        crops = [c for c in crops if c == (224, 224)] or crops
    # The smallest eval crop among the weights entries: cheapest and always accepted by a weights=None build.
    h, w = min(crops) if crops else (224, 224)
    if task == "video":
        return (3, VIDEO_FRAMES, h, w)
    return (3, h, w)


def _entry(name: str, task: str) -> ModelEntry:
    shape = _default_shape(name, task)
    if task == "quantization":
        return ModelEntry(name, task, shape, supported=False, reason=QUANTIZED_REASON)
    return ModelEntry(name, task, shape)


@functools.lru_cache(maxsize=1)
def _catalogue() -> tuple[ModelEntry, ...]:
    tasks = _task_by_name()
    return tuple(sorted((_entry(name, task) for name, task in tasks.items()),
                        key=lambda e: (TASKS.index(e.task), e.name)))


def list_catalogue(task: str | None = None) -> list[ModelEntry]:
    """The torchvision catalogue, grouped by task (in TASKS order) and sorted by name within a task."""
    if task is not None and task not in TASKS:
        raise ModelError(f"unknown task {task!r}: choose one of {', '.join(TASKS)}")
    return [e for e in _catalogue() if task is None or e.task == task]


def reference_weights(task: str = "classification") -> list[WeightsReference]:
    """Every weights entry of every model of `task` with its published GMACs and eval input shape."""
    refs = []
    for entry in list_catalogue(task):
        for weights in _weights_enum(entry.name) or []:
            ops = weights.meta.get("_ops")
            crop = _crop_size(weights)
            if ops is None or crop is None:
                continue
            kwargs = {"image_size": crop[0]} if _needs_image_size(entry.name) else {}
            shape = (3, VIDEO_FRAMES, *crop) if task == "video" else (3, *crop)
            refs.append(WeightsReference(entry.name, weights.name, shape, float(ops), kwargs))
    return refs


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


def _load_factory(spec: str):
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
    names = list(_task_by_name())
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
        factory = _load_factory(spec)
        return ModelEntry(spec, "custom", _factory_input_shape(spec, factory, instance=True))
    name = spec.lower()
    task = _task_by_name().get(name)
    if task is None:
        raise ModelError(_suggest(name))
    return _entry(name, task)


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
    from torchperf_tui.engine.inputs import check_dims

    try:
        return check_dims((1, *shape))[1:]
    except ShapeError as exc:
        raise ModelError(f"{spec}: its input_shape {tuple(shape)}: {exc}") from None


def input_shape_note(spec: str) -> str | None:
    """A line when `spec`'s input shape is assumed (a custom model that declares none), else None."""
    if not _is_custom((spec or "").strip()):
        return None
    factory = _load_factory(spec.strip())
    if _declared_input_shape(spec.strip(), factory, instance=True) is not None:
        return None
    return (f"{spec.strip()} does not say its input shape (no input_shape on the factory, its class or the model "
            f"it builds): assumed {format_shape(CUSTOM_DEFAULT_SHAPE)} without the batch; give the shape, "
            f"or set input_shape = (3, 224, 224) there")


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
# Building with parameters on the meta device


_meta_state = threading.local()
_patch_lock = threading.Lock()
_patch_users = 0
_original_register_parameter = nn.Module.register_parameter
_original_register_buffer = nn.Module.register_buffer


def _redirecting() -> bool:
    return getattr(_meta_state, "depth", 0) > 0


def _register_parameter(self: nn.Module, name: str, param: nn.Parameter | None) -> None:
    _original_register_parameter(self, name, param)
    if (param is not None and _redirecting() and param.device.type != "meta"
            and not nn.parameter.is_lazy(param)):  # a lazy parameter has no storage to move yet
        # Keep the Parameter subclass and its attributes; only the storage moves (to nowhere).
        cls = type(param)
        attrs = dict(param.__dict__)
        moved = cls(param.to("meta"), requires_grad=param.requires_grad)
        moved.__dict__.update(attrs)
        self._parameters[name] = moved


def _register_buffer(self: nn.Module, name: str, tensor: torch.Tensor | None, persistent: bool = True) -> None:
    _original_register_buffer(self, name, tensor, persistent=persistent)
    if tensor is not None and _redirecting() and tensor.device.type != "meta":
        self._buffers[name] = tensor.to("meta")


@contextlib.contextmanager
def parameters_on_meta() -> Iterator[None]:
    """Build modules with every parameter and buffer moved to the meta device as it is registered.

    Unlike `with torch.device("meta")`, ordinary tensor maths in a builder still runs on the CPU, so
    builders that compute layer widths with tensors (the RegNets) work. Each parameter exists on the
    CPU only between its creation and its registration (one layer at a time, never initialised), and
    initialisers then run on meta tensors for free. The redirect is per thread: a model built by
    another thread meanwhile gets real weights.
    """
    global _patch_users
    with _patch_lock:
        if _patch_users == 0:
            nn.Module.register_parameter = _register_parameter  # type: ignore[method-assign]
            nn.Module.register_buffer = _register_buffer  # type: ignore[method-assign]
        _patch_users += 1
    _meta_state.depth = getattr(_meta_state, "depth", 0) + 1
    try:
        with _SkipMetaInit():
            yield
    finally:
        _meta_state.depth -= 1
        with _patch_lock:
            _patch_users -= 1
            if _patch_users == 0:
                nn.Module.register_parameter = _original_register_parameter  # type: ignore[method-assign]
                nn.Module.register_buffer = _original_register_buffer  # type: ignore[method-assign]


# In-place ops that can change a tensor's shape or storage: never skipped.
_RESHAPING_INPLACE = {"resize_", "resize_as_", "set_", "as_strided_", "squeeze_", "unsqueeze_",
                      "transpose_", "t_", "swapaxes_", "swapdims_", "detach_", "requires_grad_"}


class _SkipMetaInit(TorchFunctionMode):
    """While building on meta, skip in-place initialisers on meta tensors (normal_, zero_, kaiming_...).

    They produce no values on meta anyway, but run through Python decompositions, which made
    initialisation the larger part of a meta build. Modes are per thread, so other threads are unaffected.
    """

    def __torch_function__(self, func, types, args=(), kwargs=None):
        name = getattr(func, "__name__", "")
        if (name.endswith("_") and not name.startswith("_") and name not in _RESHAPING_INPLACE
                and args and isinstance(args[0], torch.Tensor) and args[0].device.type == "meta"):
            return args[0]
        return func(*args, **(kwargs or {}))


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
    factory = _load_factory(spec)
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
                builder_kwargs: dict[str, Any] | None = None) -> nn.Module:
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
