"""Profiler ranges per module, and the profiled loop both per-layer views run: the kernels each conv layer
ran (engine/kernels.py) and the time each layer takes (engine/layer_times.py).

A forward pre-hook and a forward hook on a module open and close a `record_function` range named after its
qualified name, so the ops recorded inside the range (and on a GPU the kernels they launched, attached to
the op by correlation id) belong to that module. The hooks are removed by the caller, whatever happens.
Each profiled iteration is wrapped in a range of its own (ITERATION_LABEL), synchronised on a GPU, so the
trace says where one ends and the next begins.
"""

from __future__ import annotations

import warnings
from typing import Any, Callable

from torchperf_tui.engine.lazy_torch import torch

LAYER_PREFIX = "torchperf-tui/layer:"
ITERATION_LABEL = "torchperf-tui/iteration"
BACKWARD_PREFIX = "autograd::engine::evaluate_function: "


def _range_type() -> Any:
    """The cheapest range torch has: _RecordFunctionFast (about 1 µs to open and close, against some 18 µs for
    torch.profiler.record_function, which over ResNet-18's 68 modules added 8 % to a CPU pass), else the public
    record_function."""
    try:
        from torch._C._profiler import _RecordFunctionFast

        return _RecordFunctionFast
    except ImportError:  # an older or trimmed build
        from torch.profiler import record_function

        return record_function


def attach_layer_ranges(layers: list[tuple[str, torch.nn.Module]]) -> list[Any]:
    """Hooks that open a profiler range before each module's forward and close it after. Ranges of nested
    modules nest; a forward that raises still closes its range (always_call)."""
    make_range = _range_type()
    open_ranges: list[Any] = []
    handles = []
    for name, module in layers:
        def pre(_m, _args, label=f"{LAYER_PREFIX}{name}"):
            opened = make_range(label)
            opened.__enter__()
            open_ranges.append(opened)

        def post(_m, _args, _out):
            if open_ranges:
                open_ranges.pop().__exit__(None, None, None)

        handles.append(module.register_forward_pre_hook(pre))
        handles.append(module.register_forward_hook(post, always_call=True))
    return handles


def descendants(event: Any) -> list[Any]:
    """Every event under `event` on its CPU thread, at any depth."""
    out, stack = [], list(getattr(event, "cpu_children", []) or [])
    while stack:
        child = stack.pop()
        out.append(child)
        stack.extend(getattr(child, "cpu_children", []) or [])
    return out


def on_cpu(event: Any) -> bool:
    """The event ran on a CPU thread (an op or a range), not on the device (a kernel, a memcpy)."""
    device_type = getattr(event, "device_type", None)
    return device_type is None or getattr(device_type, "name", str(device_type)).split(".")[-1] == "CPU"


def profile_iterations(run: Callable[[torch.Tensor], Any], x: torch.Tensor, device: torch.device, iters: int,
                       warmup: int, cancelled: Callable[[], bool]) -> tuple[Any, int, bool]:
    """Warm up, then profile up to `iters` iterations of `run(x)` (a forward pass, or a training step), each
    in an ITERATION_LABEL range that ends after the device has synchronised: (events or None, iterations
    done, cancelled)."""
    from torch.profiler import ProfilerActivity, profile, record_function

    def step() -> None:
        run(x)
        if device.type == "cuda":
            torch.cuda.synchronize(device)

    for _ in range(warmup):
        if cancelled():
            return None, 0, True
        step()
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    done, stopped = 0, False
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*clears events at the end of each cycle.*")
        with profile(activities=activities) as prof:
            for _ in range(iters):
                if cancelled():
                    stopped = True
                    break
                with record_function(ITERATION_LABEL):
                    step()
                done += 1
    return (prof.events() if done else None), done, stopped
