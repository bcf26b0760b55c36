"""Building a model with its parameters on the meta device: its structure without weight memory (for the
complexity analysis, and for reading what a user's model declares), while tensor maths in its builder still
runs on the CPU.
"""

from __future__ import annotations

import contextlib
import math
import threading
from typing import Iterator

import torch
from torch import nn
from torch.overrides import TorchFunctionMode

meta_state = threading.local()
_patch_lock = threading.Lock()
_patch_users = 0
_original_register_parameter = nn.Module.register_parameter
_original_register_buffer = nn.Module.register_buffer


def _redirecting() -> bool:
    return getattr(meta_state, "depth", 0) > 0


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
    meta_state.depth = getattr(meta_state, "depth", 0) + 1
    try:
        with _SkipMetaInit():
            yield
    finally:
        meta_state.depth -= 1
        with _patch_lock:
            _patch_users -= 1
            if _patch_users == 0:
                nn.Module.register_parameter = _original_register_parameter  # type: ignore[method-assign]
                nn.Module.register_buffer = _original_register_buffer  # type: ignore[method-assign]


# Factories a builder makes parameters with. One asked for more elements than this is made on meta at once: no
# builder does its arithmetic on a tensor that large, and a layer's weights made on the CPU first, however briefly,
# could be any size an override asks for (num_classes=99999999999: a 204 TB allocation).
_FACTORIES = frozenset({"empty", "zeros", "ones", "full", "rand", "randn", "randint"})
_STRAIGHT_TO_META_ELEMENTS = 2**20


def _asked_elements(name: str, args: tuple, kwargs: dict) -> int:
    """The elements a factory call asks for (0 when its size cannot be read: it then runs as written)."""
    if "size" in kwargs:
        size = kwargs["size"]
    elif name == "full":
        size = args[0] if args else ()
    elif name == "randint":
        size = next((a for a in args if isinstance(a, (tuple, list, torch.Size))), ())
    else:
        size = args[0] if len(args) == 1 and isinstance(args[0], (tuple, list, torch.Size)) else args
    try:
        return math.prod(int(d) for d in size)
    except (TypeError, ValueError, RuntimeError):
        return 0


# In-place ops that can change a tensor's shape or storage: never skipped.
_RESHAPING_INPLACE = {"resize_", "resize_as_", "set_", "as_strided_", "squeeze_", "unsqueeze_",
                      "transpose_", "t_", "swapaxes_", "swapdims_", "detach_", "requires_grad_"}


class _SkipMetaInit(TorchFunctionMode):
    """While building on meta, make a large tensor (_STRAIGHT_TO_META_ELEMENTS) on meta at once rather than on the
    CPU until its registration, and skip in-place initialisers on meta tensors (normal_, zero_, kaiming_...).

    The initialisers produce no values on meta anyway, but run through Python decompositions, which made
    initialisation the larger part of a meta build. Modes are per thread, so other threads are unaffected.
    """

    def __torch_function__(self, func, types, args=(), kwargs=None):
        name = getattr(func, "__name__", "")
        kwargs = kwargs or {}
        if (name in _FACTORIES and str(kwargs.get("device") or "cpu") == "cpu" and "out" not in kwargs
                and _asked_elements(name, args, kwargs) > _STRAIGHT_TO_META_ELEMENTS):
            return func(*args, **{**kwargs, "device": "meta"})
        if (name.endswith("_") and not name.startswith("_") and name not in _RESHAPING_INPLACE
                and args and isinstance(args[0], torch.Tensor) and args[0].device.type == "meta"):
            return args[0]
        return func(*args, **kwargs)
