"""Measuring the ceilings (engine/hardware/ceilings.py): the most this device reaches on compute per dtype, and on a
large copy, now.

A datasheet peak says what the silicon could do; a measured ceiling says what this box does with this torch
(its BLAS and oneDNN, its clocks under load, its memory channels). A ceiling that a model beats is no ceiling:
one matmul of one size is not the most a box reaches (a model's convolutions can go faster through oneDNN, or
at another thread count), so the compute ceiling of a dtype is the best of several workloads:

- matmul, square, at a few sizes (CPU 1024, 2048, 4096; GPU 4096, 8192, 16384), 2 m k n FLOPs; a size above
  the reference one (CPU 2048, GPU 8192) only where one repetition fits the time budget at the rate reached so
  far (on a slow box the largest is skipped, and the result says so);
- matmul at the reference size in nn.Linear's layout (x @ W^T) and tall-skinny (4n x n by n x n/4: a
  convolution's im2col shape);
- 3x3 convolutions shaped like resnet's middle stages (torch.nn.functional.conv2d, stride 1, padding 1,
  2 N Cout Hout Wout Cin k k FLOPs), in NCHW and channels_last;
- on the CPU, at the current torch thread count and at all logical cores where that differs (the best matmul
  and the best convolution again); the thread count is restored afterwards (engine.measurements.flags).

Dtypes: fp32 on the CPU; on a GPU fp32 (TF32 off), tf32, fp16 and bf16, with cudnn.benchmark on for the
convolutions (every flag restored afterwards); and on both int8, one square matmul (torch._int_mm), and float8 where
the device runs it (torch._scaled_mm), for what a
quantization scheme predicts. The copy: dst.copy_(src) of a large buffer, bandwidth counting
the bytes read and the bytes written (2x size), at each thread count, the best kept.

On a GPU, the host-device transfers too (engine.hardware.ceilings.TRANSFERS): a 256 MiB buffer copied host-to-device
and device-to-host, from pinned memory (non_blocking, as a DataLoader's pin_memory feeds a model) and from pageable
memory (a plain CPU tensor: the driver stages it); bandwidth counting the bytes moved once. Each is its own ceiling,
the median of its repetitions like every workload. A CPU has none: nothing crosses a bus to reach its compute.

Each workload is a warm-up, then timed repetitions (CUDA events on a GPU, perf_counter on the CPU) as many as
fit its time budget (at least MIN_REPS, at most `reps`), their median. Every workload tried is kept beside the
ceiling (`tried`), so the result says which workload, size and thread count gave it.
"""

from __future__ import annotations

import os
import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from torchperf_tui.core.kept_files import ceilings_path
from torchperf_tui.engine.hardware.ceilings import (TRANSFER_DTYPE, TRANSFERS, Ceiling, CeilingsResult, Trial,
                                                   check_keepable, device_key, kept_entry, read_kept, save_ceilings,
                                                   transfer_name)
from torchperf_tui.engine.hardware.device_choice import resolve_device
from torchperf_tui.core.errors import TorchperfError
from torchperf_tui.engine.hardware.lazy_torch import torch
from torchperf_tui.core.formatting import format_bytes
from torchperf_tui.engine.measurements.flags import Flags, applied_flags

CPU_MATMUL_N = 2048  # the reference size: always measured, and the size of the other matmul layouts
GPU_MATMUL_N = 8192
CPU_MATMUL_SIZES = (1024, 2048, 4096)
GPU_MATMUL_SIZES = (4096, 8192, 16384)
# (batch, channels in = out, height = width) of a 3x3 convolution: resnet's middle stages
CPU_CONVS = ((8, 128, 28), (16, 256, 14))
GPU_CONVS = ((64, 128, 28), (64, 256, 14))
CPU_COPY_BYTES = 256 * 2**20
GPU_COPY_BYTES = 2 * 2**30
# A transfer's buffer: large enough that the per-copy overheads (a launch, the driver's staging set-up) are a few
# percent of it, small enough to pin without strain.
TRANSFER_BYTES = 256 * 2**20
CPU_BUDGET_S = 0.2  # the timed repetitions of one workload
GPU_BUDGET_S = 0.15
MIN_REPS = 3
GPU_DTYPES = ("float32", "tf32", "float16", "bfloat16")
# int8 matmuls (torch._int_mm, int8 in, int32 out: what torchao's int8 kernels build on), square at this size: a
# quantization scheme's prediction needs the int8 ceiling beside the float ones. Smaller on the CPU, where a box
# without int8 dot-product instructions runs it far below its float32 rate.
INT8 = "int8"
CPU_INT8_N = 512
GPU_INT8_N = 8192
# float8 matmuls (torch._scaled_mm: e4m3 in with per-tensor scales, bfloat16 out; what torchao's float8 schemes build
# on), at the int8 matmul's size, where the device runs them: CUDA at compute capability 8.9 or newer, a CPU whose
# torch build has the kernel.
FLOAT8 = "float8"


# --------------------------------------------------------------------------------------------------------
# The workloads


@dataclass(frozen=True)
class Workload:
    """One thing timed: `amount` FLOPs (compute) or bytes read + written (copy) per call."""

    kind: str  # "compute", "copy" or "transfer" (bytes moved once)
    name: str  # "matmul", "matmul x@W^T", "matmul tall-skinny", "conv2d 3x3", "conv2d 3x3 channels_last", "copy",
    # a transfer's "h2d pinned", "d2h pageable", ...
    size: str  # "2048x2048x2048" (m x k x n), "16x256x14x14 -> 256" (N x Cin x H x W -> Cout), "256.0 MiB"
    amount: int
    build: Callable[..., Callable[[], object]] = field(repr=False, compare=False)  # (device, dtype, generator)
    optional: bool = False  # measured only where one repetition fits half the budget at the rate reached so far


def _torch_dtype(dtype_name: str) -> "torch.dtype":
    return torch.float32 if dtype_name in ("float32", "tf32", INT8, FLOAT8) else getattr(torch, dtype_name)


def matmul_workload(m: int, k: int, n: int, name: str = "matmul", transposed: bool = False,
                    optional: bool = False) -> Workload:
    """C = A @ B of m x k by k x n; `transposed`: B stored n x k and used as its transpose (nn.Linear's x @ W^T)."""

    def build(device, dtype, generator):
        a = torch.randn(m, k, device=device, dtype=dtype, generator=generator)
        if transposed:
            w = torch.randn(n, k, device=device, dtype=dtype, generator=generator)
            return lambda: torch.mm(a, w.t())
        b = torch.randn(k, n, device=device, dtype=dtype, generator=generator)
        return lambda: torch.mm(a, b)

    return Workload("compute", name, f"{m}x{k}x{n}", 2 * m * k * n, build, optional)


def conv_workload(batch: int, channels: int, hw: int, channels_last: bool = False, kernel: int = 3) -> Workload:
    """A kernel x kernel convolution, stride 1, padding kernel // 2 (so Hout = H), Cin = Cout = `channels`."""

    def build(device, dtype, generator):
        import torch.nn.functional as F

        x = torch.randn(batch, channels, hw, hw, device=device, dtype=dtype, generator=generator)
        w = torch.randn(channels, channels, kernel, kernel, device=device, dtype=dtype, generator=generator)
        if channels_last:
            x, w = x.contiguous(memory_format=torch.channels_last), w.contiguous(memory_format=torch.channels_last)
        return lambda: F.conv2d(x, w, padding=kernel // 2)

    flops = 2 * batch * channels * hw * hw * channels * kernel * kernel
    name = f"conv2d {kernel}x{kernel}" + (" channels_last" if channels_last else "")
    return Workload("compute", name, f"{batch}x{channels}x{hw}x{hw} -> {channels}", flops, build)


def int8_matmul_workload(n: int) -> Workload:
    """An int8 matmul of n x n by n x n into int32 (torch._int_mm), 2 n^3 operations a call."""

    def build(device, dtype, generator):
        a = torch.randint(-128, 128, (n, n), device=device, dtype=torch.int8, generator=generator)
        b = torch.randint(-128, 128, (n, n), device=device, dtype=torch.int8, generator=generator)
        return lambda: torch._int_mm(a, b)

    return Workload("compute", "matmul int8", f"{n}x{n}x{n}", 2 * n ** 3, build)


def float8_matmul_workload(n: int) -> Workload:
    """A float8 (e4m3) matmul of n x n by n x n into bfloat16 (torch._scaled_mm, per-tensor scales of 1), 2 n^3
    operations a call; the second operand column-major, as _scaled_mm asks."""

    def build(device, dtype, generator):
        a = torch.randn(n, n, device=device, generator=generator).to(torch.float8_e4m3fn)
        b = torch.randn(n, n, device=device, generator=generator).to(torch.float8_e4m3fn).t()
        scale = torch.ones((), device=device)
        return lambda: torch._scaled_mm(a, b, scale_a=scale, scale_b=scale, out_dtype=torch.bfloat16)

    return Workload("compute", "matmul float8", f"{n}x{n}x{n}", 2 * n ** 3, build)


def runs_float8(device: "torch.device") -> bool:
    """Whether `device` runs a float8 matmul: CUDA from compute capability 8.9; elsewhere, a 16 x 16 one tried."""
    if not (hasattr(torch, "_scaled_mm") and hasattr(torch, "float8_e4m3fn")):
        return False
    if device.type == "cuda":
        return tuple(torch.cuda.get_device_capability(device)) >= (8, 9)
    try:
        float8_matmul_workload(16).build(device, None, torch.Generator(device=device).manual_seed(0))()
    except (RuntimeError, NotImplementedError, TypeError):
        return False
    return True


def copy_workload(nbytes: int) -> Workload:
    elements = nbytes // 4

    def build(device, dtype, generator):
        src = torch.empty(elements, dtype=torch.float32, device=device).uniform_(generator=generator)
        dst = torch.empty_like(src)
        return lambda: dst.copy_(src)

    return Workload("copy", "copy", format_bytes(elements * 4), 2 * elements * 4, build)


def transfer_workload(direction: str, memory: str, nbytes: int) -> Workload:
    """`nbytes` copied host-to-device ("h2d") or device-to-host ("d2h"), the host's side "pinned" (page-locked, the
    copy non_blocking) or "pageable" (a plain CPU tensor)."""
    pinned = memory == "pinned"

    def build(device, dtype, generator):
        host = torch.empty(nbytes, dtype=torch.uint8, pin_memory=pinned)
        host.fill_(1)  # its pages touched now: a first touch inside a timed copy would be the OS's time
        on_device = torch.empty(nbytes, dtype=torch.uint8, device=device)
        if direction == "h2d":
            return lambda: on_device.copy_(host, non_blocking=pinned)
        return lambda: host.copy_(on_device, non_blocking=pinned)

    return Workload("transfer", transfer_name(direction, memory), format_bytes(nbytes), nbytes, build)


def transfer_ceilings(timed: Callable[[Workload], tuple[float, int]], nbytes: int = TRANSFER_BYTES,
                      said: Callable[[str], None] | None = None) -> list[Ceiling]:
    """The host-device transfer ceilings, in TRANSFERS' order: each transfer of `nbytes` timed by `timed(workload) ->
    (median seconds, repetitions)`, its bandwidth the bytes moved over the median."""
    found = []
    for direction, memory in TRANSFERS:
        workload = transfer_workload(direction, memory, nbytes)
        if said is not None:
            said(f"{workload.name} {workload.size}")
        seconds, reps = timed(workload)
        trial = Trial(workload.name, workload.size, None, workload.amount / seconds, seconds, reps)
        found.append(Ceiling("transfer", TRANSFER_DTYPE, trial.value, workload.size, seconds, reps, workload.name,
                             tried=[trial]))
    return found


def compute_workloads(sizes: tuple[int, ...], reference: int,
                      convs: tuple[tuple[int, int, int], ...]) -> list[Workload]:
    """Square matmuls smallest first, the reference size's other layouts, then the convolutions."""
    workloads = [matmul_workload(n, n, n, optional=n > reference) for n in sorted(sizes)]
    q = max(1, reference // 4)
    workloads += [matmul_workload(reference, reference, reference, "matmul x@W^T", transposed=True),
                  matmul_workload(4 * reference, reference, q, "matmul tall-skinny")]
    for batch, channels, hw in convs:
        workloads += [conv_workload(batch, channels, hw), conv_workload(batch, channels, hw, channels_last=True)]
    return workloads


def thread_counts() -> tuple[int, ...]:
    """The current torch thread count, and all logical cores this process may use where that differs."""
    current = torch.get_num_threads()
    try:
        logical = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        logical = os.cpu_count() or current
    return (current,) if logical == current else (current, logical)


# --------------------------------------------------------------------------------------------------------
# Timing


def _timer(device: "torch.device") -> Callable[[Callable[[], object]], float]:
    def cuda(fn: Callable[[], object]) -> float:
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        return start.elapsed_time(end) / 1e3

    def cpu(fn: Callable[[], object]) -> float:
        t0 = time.perf_counter()
        fn()
        return time.perf_counter() - t0

    return cuda if device.type == "cuda" else cpu


def _median_seconds(fn: Callable[[], object], device: "torch.device", reps: int, warmup: int,
                    cancelled: Callable[[], bool], budget_s: float | None = None) -> tuple[float, int]:
    """(median seconds of one call, calls timed): `warmup` calls, then `reps`, or as many as fit `budget_s` at
    the last warm-up's pace (at least MIN_REPS)."""
    timer = _timer(device)
    warm = 0.0
    for _ in range(max(1, warmup)):
        if cancelled():
            raise TorchperfError("ceilings: cancelled")
        warm = timer(fn)
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    if budget_s is not None and warm > 0:
        reps = max(min(MIN_REPS, reps), min(reps, int(budget_s / warm)))
    times = []
    for _ in range(reps):
        if cancelled():
            raise TorchperfError("ceilings: cancelled")
        times.append(timer(fn))
    return statistics.median(times), len(times)


TimeWorkload = Callable[[Workload, str, int | None], tuple[float, int]]


def _settings(device: "torch.device", dtype_name: str, threads: int | None):
    """The flags a workload runs under: on a GPU TF32 for "tf32" only and cudnn.benchmark on, on the CPU
    `threads`; engine.measurements.flags restores what was there."""
    now = Flags.current()
    if device.type == "cuda":
        tf32 = dtype_name == "tf32"
        return applied_flags(now.replace(tf32_matmul=tf32, tf32_cudnn=tf32, cudnn_benchmark=True))
    return applied_flags(now.replace(num_threads=threads))


# --------------------------------------------------------------------------------------------------------
# Measuring


def measure_ceilings(device: str = "auto", *, matmul_sizes: tuple[int, ...] | None = None,
                     matmul_n: int | None = None, convs: tuple[tuple[int, int, int], ...] | None = None,
                     copy_bytes: int | None = None, int8_n: int | None = None, transfer_bytes: int | None = None,
                     threads: tuple[int, ...] | None = None, reps: int = 10,
                     warmup: int = 1, budget_s: float | None = None, should_cancel: Callable[[], bool] | None = None,
                     on_progress: Callable[[str], None] | None = None,
                     time_workload: TimeWorkload | None = None) -> CeilingsResult:
    """Measure the compute ceiling per dtype (the best workload) and the copy bandwidth on `device`, now; on a GPU the
    host-device transfers of `transfer_bytes` (TRANSFER_BYTES) too.

    `matmul_n`: the reference size (always measured; the other layouts run at it); `matmul_sizes`: the square
    sizes (a size above the reference only where a repetition fits half the budget at the rate reached so far);
    `convs`: (batch, channels, height) of each 3x3 convolution; `int8_n`: the int8 matmul's size; `threads`: the
    CPU thread counts tried (by
    default thread_counts()). `time_workload(workload, dtype, threads) -> (median s, reps)`: a seam for tests;
    by default the workload is built on the device and timed.
    """
    started = time.perf_counter()
    dev = resolve_device(device)
    cancelled = should_cancel or (lambda: False)
    said = on_progress or (lambda what: None)
    cuda = dev.type == "cuda"
    reference = matmul_n or (GPU_MATMUL_N if cuda else CPU_MATMUL_N)
    sizes = tuple(matmul_sizes) if matmul_sizes is not None else (GPU_MATMUL_SIZES if cuda else CPU_MATMUL_SIZES)
    sizes = tuple(sorted(set(sizes) | {reference}))
    budget = budget_s if budget_s is not None else (GPU_BUDGET_S if cuda else CPU_BUDGET_S)
    counts: tuple[int | None, ...] = (None,) if cuda else tuple(threads or thread_counts())
    workloads = compute_workloads(sizes, reference, convs if convs is not None else (GPU_CONVS if cuda else CPU_CONVS))
    copy = copy_workload(copy_bytes or (GPU_COPY_BYTES if cuda else CPU_COPY_BYTES))
    generator = torch.Generator(device=dev).manual_seed(0)

    def timed(workload: Workload, dtype_name: str, count: int | None) -> tuple[float, int]:
        if time_workload is not None:
            return time_workload(workload, dtype_name, count)
        fn = workload.build(dev, _torch_dtype(dtype_name), generator)
        try:
            return _median_seconds(fn, dev, reps, warmup, cancelled, budget)
        finally:
            del fn
            if cuda:
                torch.cuda.empty_cache()
                release_pinned = getattr(getattr(torch, "accelerator", None), "empty_host_cache", None)
                if workload.kind == "transfer" and release_pinned is not None:  # torch keeps pinned blocks cached
                    release_pinned()

    def timed_transfer(workload: Workload) -> tuple[float, int]:
        if cancelled():
            raise TorchperfError("ceilings: cancelled")
        return timed(workload, TRANSFER_DTYPE, None)

    def attempt(workload: Workload, dtype_name: str, count: int | None, best: float) -> Trial:
        if cancelled():
            raise TorchperfError("ceilings: cancelled")
        threads_text = f" at {count} thread{'s' if count != 1 else ''}" if count is not None and len(counts) > 1 else ""
        if workload.optional and best > 0 and workload.amount / best > budget / 2:
            return Trial(workload.name, workload.size, count, None,
                         skipped=f"one repetition would take about {workload.amount / best:.2g} s at the rate so "
                                 f"far (the budget: {budget / 2:.2g} s)")
        said(f"{dtype_name} {workload.name} {workload.size}{threads_text}")
        with _settings(dev, dtype_name, count):
            seconds, done = timed(workload, dtype_name, count)
        return Trial(workload.name, workload.size, count, workload.amount / seconds, seconds, done)

    result = CeilingsResult(device=str(dev), key=device_key(dev), measured_at=time.time())
    with torch.inference_mode():
        int8_size = int8_n or (GPU_INT8_N if cuda else CPU_INT8_N)
        special = {INT8: [int8_matmul_workload(int8_size)] if hasattr(torch, "_int_mm") else [],
                   FLOAT8: [float8_matmul_workload(int8_size)] if runs_float8(dev) else []}
        for dtype_name in (*(GPU_DTYPES if cuda else ("float32",)), *(name for name, ran in special.items() if ran)):
            tried: list[Trial] = []
            for index, count in enumerate(counts):
                if index == 0:
                    chosen = special.get(dtype_name, workloads)
                else:  # another thread count: the best matmul and the best convolution again
                    chosen = [w for w in workloads if (w.name, w.size) in _best_per_family(tried)]
                best = 0.0
                for workload in chosen:
                    trial = attempt(workload, dtype_name, count, best)
                    tried.append(trial)
                    best = max(best, trial.value or 0.0)
            result.ceilings.append(_best(tried, "compute", dtype_name))
        copies = [attempt(copy, "float32", count, 0.0) for count in counts]
        result.ceilings.append(_best(copies, "copy", "float32"))
        if cuda:
            result.transfers = transfer_ceilings(timed_transfer, transfer_bytes or TRANSFER_BYTES, said)
    result.seconds = time.perf_counter() - started
    return result


def _best_per_family(tried: list[Trial]) -> set[tuple[str, str]]:
    """(name, size) of the fastest matmul and the fastest convolution among `tried`."""
    chosen = set()
    for family in ("matmul", "conv2d"):
        ran = [t for t in tried if t.value is not None and t.workload.startswith(family)]
        if ran:
            top = max(ran, key=lambda t: t.value)
            chosen.add((top.workload, top.size))
    return chosen


def _best(tried: list[Trial], kind: str, dtype_name: str) -> Ceiling:
    ran = [t for t in tried if t.value is not None]
    top = max(ran, key=lambda t: t.value)
    return Ceiling(kind, dtype_name, top.value, top.size, top.median_s, top.reps, top.workload, top.threads, tried)


def ceilings(device: str = "auto", *, refresh: bool = False, path: Path | None = None, **options) -> CeilingsResult:
    """The kept ceilings of this device, or measured now (and kept) when there are none, they are an earlier
    version's (stale: from one matmul, or a GPU's without its transfers), or `refresh`. The file is read, and where it
    is written checked, before anything is measured: a file that cannot be read or written is one line
    (CeilingsFileError), not a measurement lost."""
    path = path or ceilings_path()
    key = device_key(resolve_device(device))
    entry = read_kept(path).get(key)
    if not refresh and entry is not None:
        kept = kept_entry(entry, path)
        if not kept.stale:
            kept.cached, kept.path = True, str(path)
            return kept
    check_keepable(path)
    result = measure_ceilings(device, **options)
    save_ceilings(result, path)
    return result
