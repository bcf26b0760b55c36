"""A CUDA memory snapshot over a few forward passes, for PyTorch's memory viewer (pytorch.org/memory_viz).

The Memory tab shows how much the caching allocator holds; a snapshot shows what holds it. With the
allocator's history recorded, the snapshot keeps every allocation and free with the Python stack that made
it, and every segment (cudaMalloc'd block) with what lives in it, so a user sees which layer's activation,
which weight or which workspace keeps reserved memory up. Recording starts before the model is moved to
the GPU, so the weights carry stacks too, and it is always stopped, even when the model fails.

torch.cuda.memory calls go through one small seam (`TorchCudaMemory`), so CPU tests drive the whole flow
with a fake recorder while the real code path stays the same.
"""

from __future__ import annotations

import os
import pickle
from dataclasses import dataclass
from typing import Any, Callable, Protocol

from torchperf_tui.engine.hardware.lazy_torch import torch

from torchperf_tui.engine.measurements.bench_config import BenchConfig
from torchperf_tui.engine.workloads.input_facts import RecordedPasses
from torchperf_tui.core.errors import DeviceError, OutOfMemory, TorchperfError
from torchperf_tui.engine.measurements.flags import applied_flags
from torchperf_tui.engine.workloads.inputs import dtype_name
from torchperf_tui.engine.hardware.nvml import to_jsonable
from torchperf_tui.engine.workloads.workload import forward_errors, prepare_workload
from torchperf_tui.core.output_files import artifact_path, check_output_path, write_output
from torchperf_tui.engine.measurements.train_step import StepRunner, grad_context

DEFAULT_ITERS = 3
SNAPSHOT_PICKLE_PROTOCOL = 4  # what memory_viz shows; see write_snapshot
DEFAULT_MAX_ENTRIES = 100_000  # alloc/free events kept (a ring buffer); each costs a few KB with its stack
VIEWER_HINT = "open it at https://pytorch.org/memory_viz (drag the file in)"
NOT_CUDA = ("memory snapshots record the CUDA caching allocator: this needs a CUDA device "
            "(on CPU use the Memory tab's RSS curve)")

ShouldCancel = Callable[[], bool]


class MemoryRecorder(Protocol):
    """What the snapshot needs from torch.cuda.memory; tests inject a fake."""

    def records_on(self, device: torch.device) -> bool: ...
    def record(self, max_entries: int) -> None: ...
    def stop(self) -> None: ...
    def snapshot(self) -> dict[str, Any]: ...
    def reset_peak(self, device: torch.device) -> None: ...
    def peak(self, device: torch.device) -> int: ...
    def synchronize(self, device: torch.device) -> None: ...


class TorchCudaMemory:
    """The real MemoryRecorder: a thin adapter over torch.cuda's allocator history and statistics."""

    def records_on(self, device: torch.device) -> bool:
        return device.type == "cuda"

    def record(self, max_entries: int) -> None:
        # The string API (enabled/context/stacks/max_entries) is the one torch has had since 2.1;
        # clear_history (so a second snapshot does not repeat the first one's events) came later.
        # stacks="python": the model's own lines are what a user reads, and symbolising C++ frames can
        # take minutes when the snapshot is taken.
        kwargs: dict[str, Any] = dict(enabled="all", context="all", stacks="python", max_entries=max_entries)
        try:
            torch.cuda.memory._record_memory_history(**kwargs, clear_history=True)
        except TypeError:
            torch.cuda.memory._record_memory_history(**kwargs)

    def stop(self) -> None:
        torch.cuda.memory._record_memory_history(enabled=None)

    def snapshot(self) -> dict[str, Any]:
        return torch.cuda.memory._snapshot()

    def reset_peak(self, device: torch.device) -> None:
        torch.cuda.reset_peak_memory_stats(device)

    def peak(self, device: torch.device) -> int:
        return int(torch.cuda.max_memory_allocated(device))

    def synchronize(self, device: torch.device) -> None:
        torch.cuda.synchronize(device)


@dataclass
class MemorySnapshotResult(RecordedPasses):
    path: str | None  # the pickled snapshot; None when cancelled before the first pass
    size_bytes: int
    peak_allocated_bytes: int  # since recording started: weights, input and the passes' activations
    entries: int  # alloc/free events in the history (at most DEFAULT_MAX_ENTRIES: older ones were dropped)
    segments: int  # cudaMalloc'd segments held by the allocator when the snapshot was taken
    cancelled: bool
    viewer_hint: str = VIEWER_HINT
    step: str = "infer"  # what each iteration was: "infer", or "train (sgd)"; " · amp bf16" under autocast

    def to_dict(self) -> dict[str, Any]:
        return to_jsonable(self)


def default_snapshot_path(model: str, out_dir: str | None = None) -> str:
    """<out_dir or temp dir/torchperf-tui/memsnap>/<model>-<UTC time>-<pid>.pickle, as traces are named."""
    return artifact_path("memsnap", model, "pickle", out_dir)


def write_snapshot(snapshot: dict[str, Any], path: str) -> int:
    """Pickle the snapshot dict (what torch's _dump_snapshot writes and memory_viz reads); its size in bytes.

    Pickle protocol 4, not the interpreter's default: Python 3.14's default (5) loads in pytorch.org/memory_viz
    but shows nothing. Written beside the target and renamed, so the announced path never holds half a file,
    and a target that is not a regular file is refused."""
    def fill(temp: str) -> None:  # streamed to the file: a snapshot can be hundreds of MB
        with open(temp, "wb") as fh:
            pickle.dump(snapshot, fh, protocol=SNAPSHOT_PICKLE_PROTOCOL)

    return os.path.getsize(write_output(path, fill, make_parents=True))


def count_entries(snapshot: dict[str, Any]) -> tuple[int, int]:
    """(trace entries over all devices, segments)."""
    traces = snapshot.get("device_traces") or []
    return sum(len(t) for t in traces), len(snapshot.get("segments") or [])


def record_memory_snapshot(cfg: BenchConfig, *, iters: int = DEFAULT_ITERS, out_dir: str | None = None,
                           should_cancel: ShouldCancel | None = None,
                           memory: MemoryRecorder | None = None) -> MemorySnapshotResult:
    """Record the allocator's history over `iters` iterations of `cfg.model` and write the snapshot: forward
    passes, or with `cfg.step == "train"` training steps, where the snapshot shows the activations kept for
    the backward, the gradients and the optimizer state that a forward pass never allocates.

    A CUDA device is needed (DeviceError otherwise). An out-of-memory still writes the snapshot, which
    then shows the failed allocation, and names its path in the OutOfMemory message.
    """
    if iters < 1:
        raise TorchperfError(f"iterations must be at least 1, got {iters}")
    memory = memory if memory is not None else TorchCudaMemory()
    def records_here(device, step) -> None:
        if not memory.records_on(device):
            raise DeviceError(NOT_CUDA)

    plan = cfg.prepare(before_amp=records_here)
    device, dtype, step, shape = plan.device, plan.dtype, plan.step, plan.shape
    cancelled = should_cancel or (lambda: False)
    path = default_snapshot_path(cfg.model, out_dir)
    check_output_path(path, make_parents=True)  # a bad --out is one line before anything is recorded
    done, was_cancelled, work = 0, False, None
    memory.reset_peak(device)
    memory.record(DEFAULT_MAX_ENTRIES)
    try:
        try:
            work = prepare_workload(cfg.model, plan.inputs, device, dtype, cfg.channels_last,
                                     model_args=cfg.model_args, quant=cfg.quant, attn=cfg.attn)
            model, x = work.model, work.x
            run_step = StepRunner(model, step, device, seed=cfg.seed)
            with applied_flags(cfg.flags), grad_context(step), \
                    forward_errors(cfg.model, shape, dtype, device, action="snapshotting"):
                for _ in range(iters):
                    if cancelled():
                        was_cancelled = True
                        break
                    run_step(x)
                    done += 1
                memory.synchronize(device)
        except OutOfMemory as exc:
            try:
                write_snapshot(memory.snapshot(), path)
            except Exception:  # the failure itself is what the user must read
                raise exc from None
            raise OutOfMemory(f"{exc} (memory snapshot of the failure: {path})") from None
        del model, x, run_step
        snapshot = memory.snapshot() if done else {}
        peak = memory.peak(device)
    finally:
        memory.stop()
        if work is not None:
            work.release()
    size = write_snapshot(snapshot, path) if done else 0
    entries, segments = count_entries(snapshot)
    return MemorySnapshotResult(
        **cfg.input_facts(plan.inputs),
        model=cfg.model, device=str(device), input_shape=tuple(shape), dtype=dtype_name(dtype), iters=done,
        path=path if done else None, size_bytes=size, peak_allocated_bytes=peak, entries=entries,
        segments=segments, cancelled=was_cancelled, step=step.describe(),
    )
