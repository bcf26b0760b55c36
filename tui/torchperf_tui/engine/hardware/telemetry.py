"""Telemetry: timestamped samples of GPU (NVML), allocator and host memory in a fixed-size ring buffer,
and `release_memory()` to hand cached memory back to the system.

A sample runs at 2 Hz in the TUI, so it must be cheap: NVML is opened once (the shared `Nvml`), handles
are cached there, and static facts (GPU count, CUDA availability) are read once per sampler. An NVML
failure degrades only the field it feeds to `NA(reason)`; sampling never stops.
"""

from __future__ import annotations

import collections
import ctypes
import ctypes.util
import dataclasses
import gc
import platform
import threading
import time
from typing import Any

import psutil

from torchperf_tui.core.errors import DeviceError
from torchperf_tui.engine.hardware.nvml import NA, Nvml, default_nvml
from torchperf_tui.core.formatting import format_bytes
from torchperf_tui.engine.hardware.device import TorchCudaBackend, nvml_index_for

MiB = 1024**2


@dataclasses.dataclass
class GpuSample:
    index: int  # NVML index
    mem_used_bytes: int | NA
    mem_total_bytes: int | NA
    mem_free_bytes: int | NA
    util_gpu_pct: int | NA
    util_mem_pct: int | NA
    temperature_c: int | NA
    power_w: float | NA
    sm_clock_mhz: int | NA


@dataclasses.dataclass
class TelemetrySample:
    timestamp: float  # time.time()
    gpus: list[GpuSample]
    torch_allocated_bytes: int | NA
    torch_reserved_bytes: int | NA
    torch_peak_bytes: int | NA
    process_rss_bytes: int | NA
    system_ram_used_bytes: int | NA
    system_ram_total_bytes: int | NA


class _AllocatorElsewhere:
    """A CUDA backend for a process that holds no model: the app's UI process, whose measurement process owns
    the caching allocator. Its figures read n/a here; the app shows the measurement process's instead."""

    def is_available(self) -> bool:
        return False

    def unavailable_reason(self) -> str:
        return "the caching allocator lives in the measurement process"


ALLOCATOR_ELSEWHERE = _AllocatorElsewhere()


def _default_cuda() -> Any:
    return TorchCudaBackend()


def _sample_gpu(nvml: Nvml, index: int) -> GpuSample:
    mem = nvml.query(index, "nvmlDeviceGetMemoryInfo")
    util = nvml.query(index, "nvmlDeviceGetUtilizationRates")
    return GpuSample(
        index=index,
        mem_used_bytes=mem if isinstance(mem, NA) else int(mem.used),
        mem_total_bytes=mem if isinstance(mem, NA) else int(mem.total),
        mem_free_bytes=mem if isinstance(mem, NA) else int(mem.free),
        util_gpu_pct=util if isinstance(util, NA) else int(util.gpu),
        util_mem_pct=util if isinstance(util, NA) else int(util.memory),
        temperature_c=nvml.temperature_c(index),
        power_w=nvml.power_w(index),
        sm_clock_mhz=nvml.clock_mhz(index, "NVML_CLOCK_SM"),
    )


class _HostMemory:
    """RSS and system RAM through psutil; a failure degrades to NA like NVML does."""

    def __init__(self) -> None:
        self._process = psutil.Process()

    def follow(self, pid: int) -> None:
        """Read another process's RSS from now on (the app's measurement process, which holds the model)."""
        try:
            self._process = psutil.Process(pid)
        except Exception:  # gone already: keep reading this one
            pass

    def rss(self) -> int | NA:
        try:
            return int(self._process.memory_info().rss)
        except Exception as exc:
            return NA(f"RSS unreadable: {exc}")

    def ram(self) -> tuple[int | NA, int | NA]:
        try:
            vm = psutil.virtual_memory()
        except Exception as exc:
            missing = NA(f"RAM unreadable: {exc}")
            return missing, missing
        # total - available is what other programs cannot have; psutil's `used` leaves out buffers/cache oddly.
        return int(vm.total - vm.available), int(vm.total)


class TelemetrySampler:
    """Takes samples on demand and keeps the last `capacity` of them (memory never grows)."""

    def __init__(self, nvml: Nvml | None = None, cuda: Any = None, capacity: int = 600) -> None:
        if capacity < 1:
            raise ValueError("capacity must be at least 1")
        self._nvml = nvml if nvml is not None else default_nvml()
        self._cuda = cuda if cuda is not None else _default_cuda()
        self._buffer: collections.deque[TelemetrySample] = collections.deque(maxlen=capacity)
        self._lock = threading.Lock()
        self._host = _HostMemory()
        # Static facts, read once: re-reading them per sample would cost NVML/driver calls at 2 Hz.
        self._gpu_indices = list(range(self._nvml.device_count()))
        try:
            available = bool(self._cuda.is_available())
            self._cuda_count = self._cuda.device_count() if available else 0
            self._no_cuda = None if available else NA(self._cuda.unavailable_reason() or "CUDA not available")
        except Exception as exc:
            self._cuda_count, self._no_cuda = 0, NA(f"CUDA check failed: {exc}")

    def follow_process(self, pid: int) -> None:
        """Take RSS from process `pid` rather than this one: the app's UI process holds no model."""
        self._host.follow(pid)

    @property
    def history(self) -> list[TelemetrySample]:
        """The retained samples, oldest first (a copy: safe to read while sampling goes on)."""
        with self._lock:
            return list(self._buffer)

    def _allocator(self) -> tuple[int | NA, int | NA, int | NA]:
        if self._no_cuda is not None:
            return self._no_cuda, self._no_cuda, self._no_cuda
        try:
            # A process that has not initialised CUDA has allocated nothing; answering 0 here keeps the
            # sampler from ever being what creates a CUDA context (hundreds of MiB on the GPU).
            if not self._cuda.is_initialized():
                return 0, 0, 0
            indices = range(self._cuda_count)
            return (sum(self._cuda.memory_allocated(i) for i in indices),
                    sum(self._cuda.memory_reserved(i) for i in indices),
                    sum(self._cuda.max_memory_allocated(i) for i in indices))
        except Exception as exc:
            missing = NA(f"allocator unreadable: {exc}")
            return missing, missing, missing

    def sample(self) -> TelemetrySample:
        """One timestamped record, also appended to the ring buffer. Never raises for NVML trouble."""
        allocated, reserved, peak = self._allocator()
        ram_used, ram_total = self._host.ram()
        record = TelemetrySample(
            timestamp=time.time(),
            gpus=[_sample_gpu(self._nvml, j) for j in self._gpu_indices],
            torch_allocated_bytes=allocated,
            torch_reserved_bytes=reserved,
            torch_peak_bytes=peak,
            process_rss_bytes=self._host.rss(),
            system_ram_used_bytes=ram_used,
            system_ram_total_bytes=ram_total,
        )
        with self._lock:
            self._buffer.append(record)
        return record


# --------------------------------------------------------------------------------------------------------
# Releasing memory
# --------------------------------------------------------------------------------------------------------


@dataclasses.dataclass
class ReleaseReport:
    device: str  # "cuda", "cuda:N" or "cpu"
    reserved_before_bytes: int | NA
    reserved_after_bytes: int | NA
    nvml_used_before_bytes: int | NA
    nvml_used_after_bytes: int | NA
    rss_before_bytes: int | NA
    rss_after_bytes: int | NA
    released_bytes: int  # CUDA: drop in reserved memory; CPU: drop in RSS (never negative)
    note: str = ""  # e.g. why malloc_trim could not run

    @property
    def released_mib(self) -> float:
        return self.released_bytes / MiB

    def summary(self) -> str:
        """One line for a notification: "released 412.0 MiB (reserved 1.2 GiB -> 0.8 GiB; ...)"."""
        parts = []
        if self.device.startswith("cuda"):
            parts.append(_before_after("reserved", self.reserved_before_bytes, self.reserved_after_bytes))
            if not isinstance(self.nvml_used_before_bytes, NA):
                parts.append(_before_after("GPU used", self.nvml_used_before_bytes, self.nvml_used_after_bytes))
        else:
            parts.append(_before_after("RSS", self.rss_before_bytes, self.rss_after_bytes))
        if self.note:
            parts.append(self.note)
        return f"released {format_bytes(self.released_bytes)} ({'; '.join(parts)})"


def _before_after(label: str, before: int | NA, after: int | NA) -> str:
    numbers = [v for v in (before, after) if not isinstance(v, NA)]
    like = max(numbers, key=abs) if numbers else None
    return f"{label} {format_bytes(before, like=like)} -> {format_bytes(after, like=like)}"


_malloc_trim: Any = None
_malloc_trim_reason: str | None = None


def _find_malloc_trim() -> Any:
    """glibc's malloc_trim, or None (musl, macOS, Windows) with the reason kept for the report."""
    global _malloc_trim, _malloc_trim_reason
    if _malloc_trim is None and _malloc_trim_reason is None:
        if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
            _malloc_trim_reason = "malloc_trim needs glibc"
        else:
            try:
                libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
                _malloc_trim = libc.malloc_trim
                _malloc_trim.argtypes = [ctypes.c_size_t]
                _malloc_trim.restype = ctypes.c_int
            except (OSError, AttributeError) as exc:
                _malloc_trim_reason = f"malloc_trim unavailable: {exc}"
    return _malloc_trim


def process_gpu_memory(nvml: Nvml, index: int, pid: int) -> int | NA:
    """GPU memory NVML counts for process `pid` on GPU `index`: its CUDA context, the caching allocator's
    reserved memory and whatever else it allocated outside PyTorch. 0 when the process has no context there."""
    processes = nvml.query(index, "nvmlDeviceGetComputeRunningProcesses")
    if isinstance(processes, NA):
        return processes
    for process in processes:
        if process.pid == pid:
            used = getattr(process, "usedGpuMemory", None)
            return used if _is_bytes(used) else NA("NVML does not report per-process memory here (MIG or WSL?)")
    return 0


def _is_bytes(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _nvml_used(nvml: Nvml, indices: list[int]) -> int | NA:
    total = 0
    for j in indices:
        mem = nvml.query(j, "nvmlDeviceGetMemoryInfo")
        if isinstance(mem, NA):
            return mem
        total += int(mem.used)
    return total


def release_memory(device: str = "auto", nvml: Nvml | None = None, cuda: Any = None) -> ReleaseReport:
    """Give cached memory back: CUDA: gc.collect + empty_cache; CPU: gc.collect + malloc_trim(0).

    Asking for CUDA where there is none is a DeviceError (as in inputs.resolve_device).
    """
    device = (device or "auto").strip().lower()
    if cuda is None and device != "cpu":  # a CPU release need not import torch
        cuda = _default_cuda()
    host = _HostMemory()
    if device == "auto":
        device = "cuda" if cuda.is_available() else "cpu"
    if device == "cpu":
        rss_before = host.rss()
        gc.collect()
        trim = _find_malloc_trim()
        if trim is not None:
            trim(0)  # return freed heap pages to the OS; gc alone leaves them in glibc's arenas
        rss_after = host.rss()
        released = 0
        if not isinstance(rss_before, NA) and not isinstance(rss_after, NA):
            released = max(0, rss_before - rss_after)
        missing = NA("not a CUDA release")
        return ReleaseReport("cpu", missing, missing, missing, missing, rss_before, rss_after, released,
                             note="" if trim is not None else (_malloc_trim_reason or ""))
    if not device.startswith("cuda"):
        raise DeviceError(f"unknown device {device!r}: use cpu, cuda or cuda:N")
    if not cuda.is_available():
        raise DeviceError("CUDA was asked for, but no CUDA device is available on this machine"
                          + (f" ({cuda.unavailable_reason()})" if cuda.unavailable_reason() else ""))
    count = cuda.device_count()
    if device == "cuda":
        indices = list(range(count))
    else:
        try:
            index = int(device.partition(":")[2])
        except ValueError:
            raise DeviceError(f"unknown device {device!r}: use cpu, cuda or cuda:N") from None
        if not 0 <= index < count:
            raise DeviceError(f"{device}: only {count} CUDA device(s) present")
        indices = [index]

    nvml = nvml if nvml is not None else default_nvml()
    nvml_indices: list[int] = []
    unmatched: NA | None = None
    for i in indices:
        j = nvml_index_for(nvml, cuda, i)
        if isinstance(j, NA):
            unmatched = j
        else:
            nvml_indices.append(j)

    def used() -> int | NA:
        return unmatched if unmatched is not None else _nvml_used(nvml, nvml_indices)

    def reserved() -> int:
        return sum(cuda.memory_reserved(i) for i in indices)

    reserved_before, used_before, rss_before = reserved(), used(), host.rss()
    gc.collect()  # drop unreachable tensors first so their blocks become free cache
    cuda.empty_cache()  # empties the cache of every device, whichever one was asked for
    reserved_after, used_after, rss_after = reserved(), used(), host.rss()
    return ReleaseReport(device, reserved_before, reserved_after, used_before, used_after, rss_before,
                         rss_after, max(0, reserved_before - reserved_after))
