"""timm models as `timm:NAME`: every name of `timm.list_models()`, built with `pretrained=False` (nothing is
downloaded), with the input size its pretrained config names (read from timm's registry, no download) and
--model-args checked against the model class's keyword arguments.

Imported only by the measurement process and the CLI (it imports torch).
"""

from __future__ import annotations

import difflib
import functools
import inspect
from typing import TYPE_CHECKING, Any

from torchperf_tui.core.errors import ModelError, first_line
from torchperf_tui.engine.workloads.model_args import ModelArgs, check_keys, coerce

if TYPE_CHECKING:
    import torch
    from torch import nn

PREFIX = "timm:"
INSTALL = "pip install timm"
DEFAULT_INPUT_SIZE: tuple[int, ...] = (3, 224, 224)
# Keyword arguments of a model class that are not settings a user types (create_model's device and dtype are
# --device and --dtype).
NOT_SETTINGS = frozenset({"self", "device", "dtype"})


def _timm():
    try:
        import timm
    except ImportError:
        raise ModelError(f"timm: models need timm, which is not installed: {INSTALL}") from None
    return timm


def strip_prefix(name: str) -> str:
    name = (name or "").strip()
    return name[len(PREFIX):].strip() if name.lower().startswith(PREFIX) else name


@functools.lru_cache(maxsize=1)
def _names() -> tuple[str, ...]:
    return tuple(_timm().list_models())


def model_names() -> list[str]:
    """Every model timm can build, sorted (its architectures, without pretrained tags)."""
    return list(_names())


def check_name(name: str) -> str:
    """The name as timm knows it (a pretrained tag such as resnet18.a1_in1k is allowed), else a ModelError with the
    closest names."""
    timm = _timm()
    name = strip_prefix(name)
    if not name:
        raise ModelError("timm: needs a model name, e.g. timm:resnet18")
    if timm.is_model(name):
        return name
    if name.lower() != name and timm.is_model(name.lower()):
        return name.lower()
    close = difflib.get_close_matches(name.lower(), _names(), n=3, cutoff=0.6)
    hint = f"; did you mean {', '.join(close)}?" if close else "; see `models --source timm`"
    raise ModelError(f"unknown timm model {name!r}{hint}")


def input_size(name: str) -> tuple[int, ...]:
    """(3, 224, 224): the input size of the model's default pretrained config, read from timm's registry (no
    download); DEFAULT_INPUT_SIZE where it names none."""
    name = check_name(name)
    from timm.models import get_pretrained_cfg

    try:
        cfg = get_pretrained_cfg(name)
    except Exception:  # noqa: BLE001 - a registry entry without a config: the common ImageNet size
        cfg = None
    size = getattr(cfg, "input_size", None)
    return tuple(int(d) for d in size) if size else DEFAULT_INPUT_SIZE


@functools.lru_cache(maxsize=256)
def _model_class(name: str) -> type:
    """The class timm builds for `name`, from one build on the meta device (no weight memory)."""
    import torch

    timm = _timm()
    try:
        with torch.device("meta"):
            return type(timm.create_model(name, pretrained=False))
    except Exception as exc:  # noqa: BLE001 - a model timm cannot build is one line
        raise ModelError(f"cannot build timm:{name}: {type(exc).__name__}: {first_line(exc)}") from None


def settings(name: str) -> dict[str, Any]:
    """The keyword arguments `name`'s model class takes, with their defaults (None where it has none)."""
    params = inspect.signature(_model_class(check_name(name)).__init__).parameters
    return {k: (None if p.default is inspect.Parameter.empty else p.default) for k, p in params.items()
            if k not in NOT_SETTINGS and p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL)}


def builder_kwargs(name: str, model_args: ModelArgs = ()) -> dict[str, Any]:
    """The overrides as keyword arguments of timm.create_model: each key checked against the model class's own
    keyword arguments (ModelError with the closest ones), each value parsed against its default."""
    if not model_args:
        return {}
    name = check_name(name)
    owner = PREFIX + name
    accepted = settings(name)
    check_keys(owner, model_args, accepted, what="keyword argument")
    return {key: coerce(owner, key, text, accepted[key]) for key, text in model_args}


def build(name: str, model_args: ModelArgs = (), device: "str | torch.device" = "cpu") -> "nn.Module":
    """timm's model `name` with random weights (pretrained=False), in eval mode, built on `device` ("meta": the
    structure without memory)."""
    import torch

    timm = _timm()
    name = check_name(name)
    kwargs = builder_kwargs(name, model_args)
    try:
        with torch.device(device):
            model = timm.create_model(name, pretrained=False, **kwargs)
    except Exception as exc:  # noqa: BLE001 - timm refusing the arguments is one line
        raise ModelError(f"cannot build {PREFIX}{name}: {type(exc).__name__}: {first_line(exc)}") from None
    return model.eval()


def input_shape(name: str, model_args: ModelArgs = ()) -> tuple[int, ...]:
    """The input without the batch: input_size(), with the image size and channels the overrides set (img_size,
    in_chans)."""
    size = input_size(name)
    kwargs = builder_kwargs(name, tuple((k, v) for k, v in model_args if k in ("img_size", "in_chans")))
    channels, h, w = size if len(size) == 3 else (size[0], *size[-2:])
    if "img_size" in kwargs:
        img = kwargs["img_size"]
        h, w = (img, img) if isinstance(img, int) else tuple(img)[:2]
    if "in_chans" in kwargs:
        channels = kwargs["in_chans"]
    return int(channels), int(h), int(w)
