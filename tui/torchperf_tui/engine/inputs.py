"""Parsing what the user types about inputs (shape, dtype, device) and making the input tensor.

Parsing needs no torch (the app's UI process checks shapes and dtypes without it); only the functions that
return torch objects import it.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from torchperf_tui.engine.errors import DeviceError, ShapeError

if TYPE_CHECKING:
    import torch

DTYPE_NAMES: tuple[str, ...] = ("float32", "float16", "bfloat16")  # attributes of torch with these names
DTYPE_ALIASES = {"fp32": "float32", "f32": "float32", "fp16": "float16", "half": "float16",
                 "f16": "float16", "bf16": "bfloat16"}


# Bounds on an input shape: a dimension must fit a 32-bit index and the whole tensor must be one that some
# machine could hold (2**40 elements is 4 TiB in float32). Past them torch fails with an overflow deep
# inside, or the meta-device analysis reports nonsense.
MAX_DIM = 2**31 - 1
MAX_ELEMENTS = 2**40


def parse_shape(text: str) -> tuple[int, ...]:
    """'1x3x224x224' (also '1,3,224,224' or '1 3 224 224') -> (1, 3, 224, 224)."""
    parts = [p for p in re.split(r"[x×,\s]+", text.strip().lower()) if p]
    if not parts:
        raise ShapeError("empty input shape: give it like 1x3x224x224")
    try:
        dims = tuple(int(p) for p in parts)
    except ValueError:
        raise ShapeError(f"malformed input shape {text!r}: give it like 1x3x224x224") from None
    if len(dims) < 2:
        raise ShapeError(f"input shape {text!r} needs a batch dimension and at least one more")
    return check_dims(dims)


def check_dims(dims: tuple[int, ...]) -> tuple[int, ...]:
    """`dims` if every dimension is >= 1 and the shape is within MAX_DIM and MAX_ELEMENTS; ShapeError if not."""
    dims = tuple(dims)
    if any(d <= 0 for d in dims):
        raise ShapeError(f"input shape {format_shape(dims)} has a dimension <= 0")
    if any(d > MAX_DIM for d in dims):
        raise ShapeError(f"input shape {format_shape(dims)[:80]}: a dimension is over {MAX_DIM:,}")
    total = 1
    for d in dims:
        total *= d
    if total > MAX_ELEMENTS:
        raise ShapeError(f"input shape {format_shape(dims)}: {total:.3g} elements is more than any device "
                         f"holds (at most {MAX_ELEMENTS:.3g})")
    return dims


def format_shape(shape: tuple[int, ...] | list[int]) -> str:
    return "x".join(str(d) for d in shape)


def canonical_dtype(name: str) -> str:
    """'fp16', 'half', 'float16' -> 'float16'; ShapeError for a dtype the app does not time."""
    key = DTYPE_ALIASES.get(name.strip().lower(), name.strip().lower())
    if key not in DTYPE_NAMES:
        raise ShapeError(f"unknown dtype {name!r}: choose one of {', '.join(DTYPE_NAMES)}")
    return key


def parse_dtype(name: str) -> "torch.dtype":
    import torch

    return getattr(torch, canonical_dtype(name))


def dtype_name(dtype: "torch.dtype") -> str:
    """torch.float16 -> 'float16' (the names DTYPE_NAMES and torch share)."""
    return str(dtype).removeprefix("torch.")


def resolve_device(name: str = "auto") -> "torch.device":
    """'auto' picks CUDA when present; asking for CUDA on a box without it is a DeviceError."""
    import torch

    name = (name or "auto").strip().lower()
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cpu":
        return torch.device("cpu")
    if name.startswith("cuda"):
        if not torch.cuda.is_available():
            raise DeviceError("CUDA was asked for, but no CUDA device is available on this machine")
        dev = torch.device(name)
        if dev.index is not None and dev.index >= torch.cuda.device_count():
            raise DeviceError(f"{name}: only {torch.cuda.device_count()} CUDA device(s) present")
        return dev
    raise DeviceError(f"unknown device {name!r}: use cpu, cuda or cuda:N")


def make_input(shape: tuple[int, ...], dtype: "torch.dtype | None" = None,
               device: "torch.device | str" = "cpu", channels_last: bool = False,
               seed: int = 0) -> "torch.Tensor":
    """A deterministic random input (float32 unless `dtype` says otherwise); channels_last applies to 4-D
    (NCHW) and 5-D (NCDHW) inputs."""
    import torch

    dtype = torch.float32 if dtype is None else dtype
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(shape, generator=gen, dtype=torch.float32).to(device=device, dtype=dtype)
    if channels_last:
        if x.dim() == 4:
            x = x.contiguous(memory_format=torch.channels_last)
        elif x.dim() == 5:
            x = x.contiguous(memory_format=torch.channels_last_3d)
    return x
