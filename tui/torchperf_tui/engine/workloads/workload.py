"""A model made ready to run, and the one mapping from a failing forward pass to a user-facing error.

Timing, profiling, the determinism check and the batch search all build a model the same way (weights=None,
moved to the device and dtype, channels_last where asked) and report its failures the same way.
"""

from __future__ import annotations

import os
import re
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Callable, Iterator

from torchperf_tui.engine.hardware.lazy_torch import torch

from torchperf_tui.core.errors import first_line, FlagError, ModelError, OutOfMemory, ShapeError, TorchperfError
from torchperf_tui.engine.workloads.input_spec import InputSpec
from torchperf_tui.engine.workloads.model_inputs import ModelInputs
from torchperf_tui.engine.workloads.inputs import dtype_name, format_shape
from torchperf_tui.engine.workloads.quantization import QuantReport, quantize_model

# What a model raises when it cannot take an input (a wrong channel count, a too-small image, a dtype
# its kernels lack). Anything else is a bug and should surface as one.
FORWARD_ERRORS = (RuntimeError, ValueError, TypeError, AssertionError, IndexError)
# What torch raises from F.scaled_dot_product_attention when no allowed backend can take a call.
NO_SDPA_KERNEL = re.compile(r"No available kernel|No viable backend for scaled_dot_product_attention")


def model_name(spec: str | torch.nn.Module) -> str:
    return spec if isinstance(spec, str) else type(spec).__name__


def place_model(model: torch.nn.Module, device: torch.device, dtype: torch.dtype, channels_last: bool,
                input_rank: int) -> torch.nn.Module:
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
    model: torch.nn.Module | None
    x: ModelInputs | None
    shape: tuple[int, ...]
    device: torch.device
    dtype: torch.dtype
    quantized: QuantReport | None = None  # what a quantization scheme converted, and what it left

    def release(self) -> None:
        """Drop the model and input so a following run (or a memory release) starts clean."""
        self.model = None
        self.x = None
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)


def build_for_run(spec: str, device: torch.device, dtype: torch.dtype, model_args: tuple = (),
                  attn: str | None = None) -> torch.nn.Module:
    """Build `spec` with its overrides for a run on `device` in `dtype`: hf: and timm: on the device (hf: in the
    run's dtype: no float32 copy), refused in one line first when their weights cannot fit (full-size configs);
    torchvision and custom models on the CPU, which place_model then moves and casts tensor by tensor (a torchvision
    model with overrides, which can ask for any size (num_classes=99999999999), refused first likewise)."""
    # torch and numpy: the app loads this module's results without it
    from torchperf_tui.engine.workloads.model_fit import check_fits
    from torchperf_tui.engine.workloads.models import build_model, source_of  # seconds: when needed

    source = source_of(spec)
    if source not in ("hf", "timm"):
        if source == "torchvision" and model_args:
            check_fits(spec, model_args, dtype, device)
        return build_model(spec, device="cpu", model_args=model_args)
    check_fits(spec, model_args, dtype, device)
    return build_model(spec, device=device, model_args=model_args, dtype=dtype if source == "hf" else None, attn=attn)


def prepare_workload(spec: str | torch.nn.Module, inputs: InputSpec, device: torch.device, dtype: torch.dtype,
                     channels_last: bool = False, seed: int = 0, model_args: tuple = (), quant: str | None = None,
                     attn: str | None = None,
                     before_cast: Callable[[torch.nn.Module, ModelInputs], None] | None = None) -> Workload:
    """Build `spec` (a name of any source or module:factory, with random weights drawn from `seed`, eval mode; or a
    module as it is) on `device` in `dtype`, with `model_args` (the model's checked overrides), quantized with
    `quant` (engine/workloads/quantization.py), a transformers model with the attention implementation `attn`, and
    its input made from `inputs` (deterministic for `seed`).

    `before_cast(model, x)`: called with the model built and placed in float32 and its input in float32, before the
    model is cast to `dtype` and quantized (a run that changes numerics takes its reference output there, from the
    same weights). Not for a module given as it is, which is not the caller's to cast twice."""
    name = model_name(spec)
    shape = inputs.shape
    with forward_errors(name, shape, dtype, device, action="loading"):
        if isinstance(spec, torch.nn.Module):
            model = spec.eval()
        else:
            # The same weights for the same seed: the arms of an A/B (and a reference) are one model, not two draws.
            torch.manual_seed(seed)
            if before_cast is not None:
                model = place_model(build_for_run(spec, device, torch.float32, model_args, attn), device, torch.float32,
                                    channels_last, inputs.rank)
                before_cast(model, inputs.make(device, torch.float32, channels_last, seed=seed))
            else:
                model = build_for_run(spec, device, dtype, model_args, attn)
        model = place_model(model, device, dtype, channels_last, inputs.rank)
        quantized = quantize_model(model, quant) if quant is not None else None
        x = inputs.make(device, dtype, channels_last, seed=seed)
    return Workload(name=name, model=model, x=x, shape=tuple(shape), device=device, dtype=dtype, quantized=quantized)


@contextmanager
def forward_errors(name: str, shape: tuple[int, ...] | Callable[[], tuple[int, ...]], dtype: torch.dtype,
                   device: torch.device, action: str = "running",
                   calls_done: Callable[[], int] | None = None) -> Iterator[None]:
    """Turn what a model's code raises into one line: an out-of-memory into OutOfMemory, a rejected input
    into ShapeError, anything else it raises (a ZeroDivisionError, a sys.exit) into ModelError. `shape`
    may be a callable, read when the error happens (a shape schedule changes the input as it goes).

    `calls_done()` says how many passes at this input had already completed: a failure after some did is
    the model failing, not the input being rejected."""
    try:
        yield
    except torch.OutOfMemoryError as exc:
        raise OutOfMemory(f"out of memory {action} {name} at input {format_shape(_now(shape))} on {device}: "
                          f"{first_line(exc)}") from None
    except (TorchperfError, KeyboardInterrupt, GeneratorExit):
        raise
    except (Exception, SystemExit) as exc:  # noqa: BLE001 - sorted below: the model's, or ours
        error = model_code_error(name, exc, action=action,
                                 where=f"input {format_shape(_now(shape))} ({dtype_name(dtype)})",
                                 calls_done=calls_done() if calls_done is not None else 0)
        if error is None:
            raise
        raise error from None


def model_code_error(name: str, exc: BaseException, *, action: str, where: str,
                     calls_done: int = 0) -> TorchperfError | None:
    """The one line for an exception from a model's code, or None when it came from this package (a bug,
    which must surface as one). A rejected input is an error of the kinds a model raises for a wrong shape
    or dtype on its first pass at that input; the same error after passes that ran is the model failing."""
    if isinstance(exc, SystemExit):
        return ModelError(f"{name} called sys.exit({exc.code!r}) while {action} at {where}: "
                          "the model's code tried to end the program")
    if _raised_here(exc):
        return None
    if isinstance(exc, RuntimeError) and NO_SDPA_KERNEL.search(str(exc)):  # a set the check before the run missed
        return FlagError(f"the SDPA backends allowed leave {name}'s attention no kernel at {where}: torch says "
                         f"'{first_line(exc)}'; allow math (sdpa=...+math)")
    if isinstance(exc, FORWARD_ERRORS) and calls_done == 0:
        return ShapeError(f"{name} rejected {where}: {first_line(exc)}")
    after = f" after {calls_done} pass(es) that ran" if calls_done else ""
    return ModelError(f"{name} failed while {action} at {where}{after}: {type(exc).__name__}: {first_line(exc)}")


_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


# Code of this package that only passes a model's calls on (a TorchFunctionMode recording them): an error raised
# in it is the model's, from the call it passed on.
PASSTHROUGH_CODE: set = set()


def _raised_here(exc: BaseException) -> bool:
    """True when the innermost frame of the traceback is this package's own code, not the model's or torch's (a
    PASSTHROUGH_CODE frame counts as the frame that called it)."""
    tb = exc.__traceback__
    frames = []
    while tb is not None:
        frames.append(tb.tb_frame.f_code)
        tb = tb.tb_next
    while frames and frames[-1] in PASSTHROUGH_CODE:
        frames.pop()
    return bool(frames) and os.path.abspath(frames[-1].co_filename).startswith(_PACKAGE_DIR + os.sep)


def _now(shape):
    return shape() if callable(shape) else shape
