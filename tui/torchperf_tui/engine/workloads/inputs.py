"""Parsing what the user types about inputs (shape, dtype, device) and making the input tensor.

Parsing needs no torch (the app's UI process checks shapes and dtypes without it); only the functions that
return torch objects import it.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from torchperf_tui.core.errors import InputTooLarge, ShapeError, TorchperfError
from torchperf_tui.core.run_option_table import run_option
from torchperf_tui.engine.hardware.device_choice import free_bytes
from torchperf_tui.core.formatting import format_shape  # the one shape formatter (re-exported: engine modules import it here)
from torchperf_tui.core.formatting import format_bytes
from torchperf_tui.core.json_checks import shown
from torchperf_tui.core.options import MAX_DIM

if TYPE_CHECKING:
    import torch



# What a person choosing float16 on the CPU should know before timing it (no figures: they depend on the CPU).
CPU_FLOAT16_NOTE = ("float16 on the CPU: few ops have fast float16 kernels there (they need AVX512-FP16 or AMX-FP16), "
                    "so it is often slower than float32; bfloat16 is the CPU's fast half precision (AVX512-BF16, AMX)")


def dtype_note(dtype: str, device_kind: str) -> str:
    """A word on the chosen dtype where the device makes it misleading ('cpu' or 'cuda'), else ''."""
    return CPU_FLOAT16_NOTE if dtype == "float16" and device_kind == "cpu" else ""


# Bounds on an input shape: a dimension must fit a 32-bit index (core/options.py's MAX_DIM) and the whole tensor
# must be one that some machine could hold (2**40 elements is 4 TiB in float32). Past them torch fails with an
# overflow deep inside, or the meta-device analysis reports nonsense.
MAX_ELEMENTS = 2**40


def _shape_parts(text: str) -> list[str]:
    """The dimensions as typed, split at each x, comma or run of spaces: '1xx3' keeps an empty part between its two
    x's (refused as malformed, not read as 1x3); [] for an empty text."""
    text = text.strip().lower()
    return re.split(r"\s*[x×,]\s*|\s+", text) if text else []


def _dim(part: str) -> int:
    """One dimension: decimal digits ('-3' too, refused by its size later); '', '+3', '1_000' and '٣' are not one:
    ValueError."""
    if not re.fullmatch(r"-?[0-9]+", part):
        raise ValueError(part)
    return int(part)


def parse_shape(text: str) -> tuple[int, ...]:
    """'1x3x224x224' (also '1,3,224,224' or '1 3 224 224') -> (1, 3, 224, 224)."""
    parts = _shape_parts(text)
    if not parts:
        raise ShapeError("empty input shape: give it like 1x3x224x224")
    try:
        dims = tuple(_dim(p) for p in parts)
    except ValueError:
        raise ShapeError(f"malformed input shape {text!r}: give it like 1x3x224x224") from None
    if len(dims) < 2:
        raise ShapeError(f"input shape {text!r} needs a batch dimension and at least one more")
    return check_dims(dims)


def parse_dims(text: str, field: str = "input") -> tuple[int, ...]:
    """The app's input field, which takes the shape without the batch ('3x224x224'): its errors quote what was
    typed there and give an example without a batch (the batch has a field of its own)."""
    parts = _shape_parts(text)
    example = "give it like 3x224x224 (without the batch: it has its own field)"
    if not parts:
        raise ShapeError(f"{field} is empty: {example}")
    try:
        dims = tuple(_dim(p) for p in parts)
    except ValueError:
        raise ShapeError(f"{field} {text.strip()!r} is not a shape: {example}") from None
    for i, d in enumerate(dims):
        if d <= 0:
            raise ShapeError(f"{field} {text.strip()!r}: dimension {i + 1} is {d}; every dimension must be at least 1")
    return dims


def _count(text: str | int, what: str, example: str, too_small: str, limit: int | None = None) -> int:
    """A whole number of at least 1 (and at most `limit`) as typed, or ShapeError in the words of the field `what`
    (too_small: how a number below 1 is said; {value} is the number)."""
    typed = str(text).strip()
    if not re.fullmatch(r"-?[0-9]+", typed):  # as a dimension (_dim): '1_000', '+3' and '٣' are not typed numbers
        raise ShapeError(f"{what} {shown(typed)} is not a whole number: give it like {example}")
    if len(typed) > 20:  # past any bound (and past the digits Python converts at once): said back cut
        if typed.startswith("-"):
            raise ShapeError(too_small.format(value=shown(typed)))
        raise ShapeError(f"{what} {shown(typed)}: it is over {limit or MAX_DIM:,}")
    value = int(typed)
    if value < 1:
        raise ShapeError(too_small.format(value=value))
    if limit is not None and value > limit:
        raise ShapeError(f"{what} {value}: it is over {limit:,}")
    return value


def parse_batch(text: str) -> int:
    """The app's batch field: a whole number of at least 1, said in the field's words when not."""
    return _count(text, "batch", "1 or 32", "batch {value}: the batch must be at least 1")  # its bound: check_dims


def parse_seq_len(text: str | int) -> int:
    """A sequence length as typed: a whole number of at least 1 (a model's maximum is checked where it is known)."""
    return _count(text, "sequence length", "128", "sequence length {value}: it must be at least 1", MAX_DIM)


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


def canonical_dtype(name: str) -> str:
    """'fp16', 'half', 'float16' -> 'float16'; ShapeError for a dtype the app does not time."""
    try:
        return run_option("dtype").choose(name)  # its values are the names of torch's dtypes
    except TorchperfError as exc:
        raise ShapeError(str(exc)) from None


def parse_dtype(name: str) -> "torch.dtype":
    import torch

    return getattr(torch, canonical_dtype(name))


def dtype_name(dtype: "torch.dtype") -> str:
    """torch.float16 -> 'float16' (the names the run option table's dtypes and torch share)."""
    return str(dtype).removeprefix("torch.")


def check_input_fits(shape: tuple[int, ...], dtype: "torch.dtype", device: "torch.device | str") -> None:
    """InputTooLarge, in one line with both sizes, when the input alone cannot fit where make_input builds it:
    in host RAM (it is drawn in float32 there first) and, on a GPU, in the GPU's free memory."""
    import torch

    device = torch.device(device)
    numel = 1
    for d in shape:
        numel *= d
    itemsize = torch.empty((), dtype=dtype).element_size()
    host_need = numel * 4 + (numel * itemsize if device.type == "cpu" and dtype != torch.float32 else 0)
    needs = [("cpu", host_need)] + ([(device, numel * itemsize)] if device.type == "cuda" else [])
    for where, need in needs:
        free = free_bytes(where)
        if free is not None and need > free:
            place = "the CPU has" if where == "cpu" else f"{where} has"
            raise InputTooLarge(f"input {format_shape(shape)} {dtype_name(dtype)} needs {format_bytes(need)}; {place} "
                                f"{format_bytes(free)} free: lower the batch")


def make_input(shape: tuple[int, ...], dtype: "torch.dtype | None" = None,
               device: "torch.device | str" = "cpu", channels_last: bool = False,
               seed: int = 0) -> "torch.Tensor":
    """A deterministic random input (float32 unless `dtype` says otherwise); channels_last applies to 4-D
    (NCHW) and 5-D (NCDHW) inputs."""
    import torch

    dtype = torch.float32 if dtype is None else dtype
    check_input_fits(shape, dtype, device)
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(shape, generator=gen, dtype=torch.float32).to(device=device, dtype=dtype)
    if channels_last:
        if x.dim() == 4:
            x = x.contiguous(memory_format=torch.channels_last)
        elif x.dim() == 5:
            x = x.contiguous(memory_format=torch.channels_last_3d)
    return x
