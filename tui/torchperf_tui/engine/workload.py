"""A model made ready to run, and the one mapping from a failing forward pass to a user-facing error.

Timing, profiling, the determinism check and the batch search all build a model the same way (weights=None,
moved to the device and dtype, channels_last where asked) and report its failures the same way.
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass
from typing import Callable, Iterator

import torch
from torch import nn

from torchperf_tui.engine.errors import OutOfMemory, ShapeError, first_line
from torchperf_tui.engine.inputs import dtype_name, format_shape, make_input

# What a model raises when it cannot take an input (a wrong channel count, a too-small image, a dtype
# its kernels lack). Anything else is a bug and should surface as one.
FORWARD_ERRORS = (RuntimeError, ValueError, TypeError, AssertionError, IndexError)


def model_name(spec: str | nn.Module) -> str:
    return spec if isinstance(spec, str) else type(spec).__name__


def place_model(model: nn.Module, device: torch.device, dtype: torch.dtype, channels_last: bool,
                input_rank: int) -> nn.Module:
    """Move a model to the device and dtype; channels_last for 4-D (NCHW) and 5-D (NCDHW) inputs."""
    model = model.to(device=device, dtype=dtype)
    if channels_last and input_rank == 4:
        model = model.to(memory_format=torch.channels_last)
    elif channels_last and input_rank == 5:
        model = model.to(memory_format=torch.channels_last_3d)
    return model


@dataclass
class Workload:
    """A model on its device with one input for it."""

    name: str
    model: nn.Module | None
    x: torch.Tensor | None
    shape: tuple[int, ...]
    device: torch.device
    dtype: torch.dtype

    def release(self) -> None:
        """Drop the model and input so a following run (or a memory release) starts clean."""
        self.model = None
        self.x = None
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)


def prepare_workload(spec: str | nn.Module, shape: tuple[int, ...], device: torch.device, dtype: torch.dtype,
                     channels_last: bool = False, seed: int = 0) -> Workload:
    """Build `spec` (a name or module:factory, with random weights, eval mode; or a module as it is) on
    `device` in `dtype`, with a deterministic random input of `shape`."""
    name = model_name(spec)
    with forward_errors(name, shape, dtype, device, action="loading"):
        if isinstance(spec, nn.Module):
            model = spec.eval()
        else:
            from torchperf_tui.engine.models import build_model  # torchvision: seconds, only when needed

            model = build_model(spec, device="cpu")
        model = place_model(model, device, dtype, channels_last, len(shape))
        x = make_input(shape, dtype=dtype, device=device, channels_last=channels_last, seed=seed)
    return Workload(name=name, model=model, x=x, shape=tuple(shape), device=device, dtype=dtype)


@contextmanager
def forward_errors(name: str, shape: tuple[int, ...] | Callable[[], tuple[int, ...]], dtype: torch.dtype,
                   device: torch.device, action: str = "running") -> Iterator[None]:
    """Turn an out-of-memory into OutOfMemory and a rejected input into ShapeError, each one line. `shape`
    may be a callable, read when the error happens (a shape schedule changes the input as it goes)."""
    try:
        yield
    except torch.OutOfMemoryError as exc:
        raise OutOfMemory(f"out of memory {action} {name} at input {format_shape(_now(shape))} on {device}: "
                          f"{first_line(exc)}") from None
    except FORWARD_ERRORS as exc:
        raise ShapeError(f"{name} rejected input {format_shape(_now(shape))} ({dtype_name(dtype)}): "
                         f"{first_line(exc)}") from None


def _now(shape):
    return shape() if callable(shape) else shape
