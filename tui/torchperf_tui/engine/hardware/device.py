"""Device facts: what GPU/CPU this is, probed; its theoretical peaks are computed by engine/hardware/device_peaks.py.

Facts come from torch (CUDA properties), NVML (clocks, bus width, power) and psutil (CPU, RAM). Anything
missing becomes `NA(reason)`; `probe_device()` never raises because a GPU, driver or NVML is absent.

torch is imported inside functions, not at module level, so the TUI can import this before its first frame.
"""

from __future__ import annotations

import dataclasses
import os
import platform
import warnings
from typing import Any, Protocol

import psutil

from torchperf_tui.engine.hardware.device_peaks import ARCH_SPECS, peak_figures
from torchperf_tui.core.formatting import is_positive_number
from torchperf_tui.engine.hardware.nvml import NA, Nvml, default_nvml, pcie_link, to_jsonable
from torchperf_tui.engine.hardware.topology import Topology, probe_topology

# --------------------------------------------------------------------------------------------------------
# The torch-device seam
# --------------------------------------------------------------------------------------------------------


class CudaBackend(Protocol):
    """What the engine needs from torch.cuda; tests inject tests/fakes/fake_cuda.FakeCuda instead."""

    def is_available(self) -> bool: ...
    def unavailable_reason(self) -> str | None: ...
    def is_initialized(self) -> bool: ...
    def device_count(self) -> int: ...
    def get_device_properties(self, index: int) -> Any: ...
    def memory_allocated(self, index: int) -> int: ...
    def memory_reserved(self, index: int) -> int: ...
    def max_memory_allocated(self, index: int) -> int: ...
    def empty_cache(self) -> None: ...
    def cudnn_version(self) -> int | None: ...
    def runtime_version(self) -> str | None: ...


class TorchCudaBackend:
    """The real CudaBackend: a thin adapter over torch.cuda and torch.backends.cudnn."""

    def __init__(self) -> None:
        import torch

        self._torch = torch
        self._available: bool | None = None
        self._reason: str | None = None

    def is_available(self) -> bool:
        if self._available is None:
            # torch reports why CUDA failed to initialise (old driver, ...) only as a warning: keep its text.
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                try:
                    self._available = bool(self._torch.cuda.is_available())
                except Exception as exc:  # a broken driver can raise instead of answering False
                    self._available = False
                    self._reason = f"torch.cuda.is_available() failed: {exc}"
            if not self._available and self._reason is None:
                messages = [str(w.message).strip() for w in caught if "CUDA" in str(w.message)]
                self._reason = messages[0].splitlines()[0] if messages else self._guess_reason()
        return self._available

    def _guess_reason(self) -> str:
        torch = self._torch
        if torch.version.cuda is None:
            return f"this torch build ({torch.__version__}) has no CUDA support (CPU-only wheel)"
        visible = os.environ.get("CUDA_VISIBLE_DEVICES")
        if visible is not None and visible.strip() in ("", "-1"):
            return f"CUDA_VISIBLE_DEVICES={visible!r} hides every GPU"
        if platform.system() == "Linux" and not os.path.exists("/proc/driver/nvidia/version"):
            return "no NVIDIA GPU or driver found (no /proc/driver/nvidia)"
        return "torch sees no CUDA device"

    def unavailable_reason(self) -> str | None:
        return None if self.is_available() else self._reason

    def is_initialized(self) -> bool:
        return bool(self._torch.cuda.is_initialized())

    def device_count(self) -> int:
        return int(self._torch.cuda.device_count()) if self.is_available() else 0

    def get_device_properties(self, index: int) -> Any:
        return self._torch.cuda.get_device_properties(index)

    def memory_allocated(self, index: int) -> int:
        return int(self._torch.cuda.memory_allocated(index))

    def memory_reserved(self, index: int) -> int:
        return int(self._torch.cuda.memory_reserved(index))

    def max_memory_allocated(self, index: int) -> int:
        return int(self._torch.cuda.max_memory_allocated(index))

    def empty_cache(self) -> None:
        self._torch.cuda.empty_cache()

    def cudnn_version(self) -> int | None:
        try:
            return self._torch.backends.cudnn.version()
        except Exception:  # cuDNN present but unloadable: report it as absent rather than fail the probe
            return None

    def runtime_version(self) -> str | None:
        return self._torch.version.cuda


# --------------------------------------------------------------------------------------------------------
# Reports
# --------------------------------------------------------------------------------------------------------


@dataclasses.dataclass
class GpuFacts:
    index: int
    name: str | NA
    compute_capability: str | NA
    sm_count: int | NA
    total_memory_bytes: int | NA
    l2_cache_bytes: int | NA
    max_sm_clock_mhz: int | NA
    max_mem_clock_mhz: int | NA
    memory_bus_width_bits: int | NA
    power_limit_w: float | NA
    peak_fp32_tflops: float | NA
    peak_fp16_tensor_tflops: float | NA
    peak_bf16_tensor_tflops: float | NA
    peak_bandwidth_gbs: float | NA
    formulas: dict[str, str]
    architecture: str | NA = NA("not probed")
    nvml_index: int | NA = NA("not probed")
    pcie: str | NA = NA("not probed")  # the PCIe link when probed (engine/hardware/nvml.pcie_link)


@dataclasses.dataclass
class CpuFacts:
    model: str | NA
    physical_cores: int | NA
    logical_cores: int | NA
    freq_mhz: float | NA
    ram_total_bytes: int | NA
    torch_threads: int | NA
    mkldnn_available: bool | NA


@dataclasses.dataclass
class DeviceReport:
    torch_version: str
    cuda_available: bool
    cuda_reason: str | None
    cuda_runtime: str | NA
    cudnn_version: str | NA
    driver_version: str | NA
    nvml_available: bool
    nvml_reason: str | None
    gpus: list[GpuFacts]
    cpu: CpuFacts
    topology: Topology | None = None  # how the GPUs are linked (NVML's numbering); None: not probed

    def to_dict(self) -> dict[str, Any]:
        """JSON-able: NA values become "n/a (reason)"."""
        return to_jsonable(self)


def format_cudnn_version(version: int | None) -> str | NA:
    """torch's integer cuDNN version to text: 8902 -> "8.9.2", 91300 -> "9.13.0"."""
    if not version:
        return NA("cuDNN not available")
    if version >= 90000:  # cuDNN 9 encodes major*10000 + minor*100 + patch
        return f"{version // 10000}.{version % 10000 // 100}.{version % 100}"
    return f"{version // 1000}.{version % 1000 // 100}.{version % 100}"


def _uuid_key(uuid: Any) -> str | None:
    if uuid is None or isinstance(uuid, NA):
        return None
    text = str(uuid).strip().lower()
    return text.removeprefix("gpu-") or None


def nvml_index_for(nvml: Nvml, cuda: CudaBackend, cuda_index: int, props: Any = None) -> int | NA:
    """The NVML index of torch's CUDA device `cuda_index`.

    CUDA_VISIBLE_DEVICES renumbers torch's devices while NVML keeps physical order, so match by UUID
    and only fall back to the same number when nothing hides or reorders GPUs.
    """
    if not nvml.available:
        return NA(nvml.reason or "NVML not available")
    try:
        props = props if props is not None else cuda.get_device_properties(cuda_index)
        wanted = _uuid_key(getattr(props, "uuid", None))
    except Exception:
        wanted = None
    if wanted:
        for j in range(nvml.device_count()):
            if _uuid_key(nvml.query(j, "nvmlDeviceGetUUID")) == wanted:
                return j
    if "CUDA_VISIBLE_DEVICES" not in os.environ and cuda_index < nvml.device_count():
        return cuda_index
    return NA(f"cannot match CUDA device {cuda_index} to an NVML GPU")


def _int_or(value: Any, reason: str) -> int | NA:
    return int(value) if is_positive_number(value) else (value if isinstance(value, NA) else NA(reason))


def _gpu_from_cuda(index: int, nvml: Nvml, cuda: CudaBackend) -> GpuFacts:
    try:
        props = cuda.get_device_properties(index)
    except Exception as exc:
        reason = NA(f"torch cannot read device {index}: {exc}")
        return GpuFacts(index, reason, reason, reason, reason, reason, reason, reason, reason, reason,
                        reason, reason, reason, reason, {}, reason, reason)
    cc = f"{props.major}.{props.minor}"
    j = nvml_index_for(nvml, cuda, index, props)

    def nv(function: str, *args: Any) -> Any:
        return j if isinstance(j, NA) else nvml.query(j, function, *args)

    sm_mhz = _int_or(nv("nvmlDeviceGetMaxClockInfo", nvml.const("NVML_CLOCK_SM", 1)), "NVML gave no clock")
    mem_mhz = _int_or(nv("nvmlDeviceGetMaxClockInfo", nvml.const("NVML_CLOCK_MEM", 2)), "NVML gave no clock")
    bus = _int_or(nv("nvmlDeviceGetMemoryBusWidth"), "NVML gave no bus width")
    clock_source = mem_source = "NVML"
    # Newer torch exposes cudaDeviceProp clocks (kHz) and bus width; older ones do not, hence hasattr.
    if isinstance(sm_mhz, NA) and is_positive_number(getattr(props, "clock_rate", None)):
        sm_mhz, clock_source = int(props.clock_rate) // 1000, "torch"
    if isinstance(mem_mhz, NA) and is_positive_number(getattr(props, "memory_clock_rate", None)):
        mem_mhz, mem_source = int(props.memory_clock_rate) // 1000, "torch"
    if isinstance(bus, NA) and is_positive_number(getattr(props, "memory_bus_width", None)):
        bus = int(props.memory_bus_width)
        mem_source = "torch" if mem_source == "torch" else "NVML, bus width from torch"
    power = nv("nvmlDeviceGetEnforcedPowerLimit")
    power_w = power / 1000.0 if is_positive_number(power) else _int_or(power, "NVML gave no power limit")
    peaks = peak_figures(cc, props.multi_processor_count, sm_mhz, mem_mhz, bus, props.name,
                         clock_source, mem_source)
    spec = ARCH_SPECS.get((props.major, props.minor))
    return GpuFacts(
        index=index, name=str(props.name), compute_capability=cc,
        sm_count=int(props.multi_processor_count), total_memory_bytes=int(props.total_memory),
        l2_cache_bytes=_int_or(getattr(props, "L2_cache_size", None), "torch does not report L2 size"),
        max_sm_clock_mhz=sm_mhz, max_mem_clock_mhz=mem_mhz, memory_bus_width_bits=bus, power_limit_w=power_w,
        peak_fp32_tflops=peaks.fp32_tflops, peak_fp16_tensor_tflops=peaks.fp16_tensor_tflops,
        peak_bf16_tensor_tflops=peaks.bf16_tensor_tflops, peak_bandwidth_gbs=peaks.bandwidth_gbs,
        formulas=peaks.formulas,
        architecture=spec.name if spec else NA(f"sm_{props.major}{props.minor} not in the table"),
        nvml_index=j, pcie=pcie_link(nvml, j),
    )


def _gpu_from_nvml(index: int, nvml: Nvml, why: str) -> GpuFacts:
    """A GPU that NVML sees but torch cannot use: what NVML knows, NA(why) for the rest."""
    missing = NA(why)
    cc_pair = nvml.query(index, "nvmlDeviceGetCudaComputeCapability")
    cc = f"{cc_pair[0]}.{cc_pair[1]}" if isinstance(cc_pair, tuple) else cc_pair
    mem = nvml.query(index, "nvmlDeviceGetMemoryInfo")
    sm_mhz = _int_or(nvml.query(index, "nvmlDeviceGetMaxClockInfo", nvml.const("NVML_CLOCK_SM", 1)), "no clock")
    mem_mhz = _int_or(nvml.query(index, "nvmlDeviceGetMaxClockInfo", nvml.const("NVML_CLOCK_MEM", 2)),
                      "no clock")
    bus = _int_or(nvml.query(index, "nvmlDeviceGetMemoryBusWidth"), "no bus width")
    power = nvml.query(index, "nvmlDeviceGetEnforcedPowerLimit")
    peaks = peak_figures(cc, missing, sm_mhz, mem_mhz, bus)
    return GpuFacts(
        index=index, name=nvml.query(index, "nvmlDeviceGetName"), compute_capability=cc, sm_count=missing,
        total_memory_bytes=mem if isinstance(mem, NA) else int(mem.total), l2_cache_bytes=missing,
        max_sm_clock_mhz=sm_mhz, max_mem_clock_mhz=mem_mhz, memory_bus_width_bits=bus,
        power_limit_w=power / 1000.0 if is_positive_number(power) else _int_or(power, "no power limit"),
        peak_fp32_tflops=peaks.fp32_tflops, peak_fp16_tensor_tflops=peaks.fp16_tensor_tflops,
        peak_bf16_tensor_tflops=peaks.bf16_tensor_tflops, peak_bandwidth_gbs=peaks.bandwidth_gbs,
        formulas=peaks.formulas, architecture=missing, nvml_index=index, pcie=pcie_link(nvml, index),
    )


def _driver_version(nvml: Nvml) -> str | NA:
    version = nvml.query_system("nvmlSystemGetDriverVersion")
    if isinstance(version, str):
        return version
    # Without NVML the kernel module still says its version on Linux.
    try:
        with open("/proc/driver/nvidia/version", encoding="utf-8") as fh:
            first = fh.readline()
        for token in first.split():
            if token[:1].isdigit() and token.count(".") >= 1:
                return token
    except OSError:
        pass
    return version if isinstance(version, NA) else NA("driver version unknown")


def cpu_model() -> str | NA:
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as fh:
            for line in fh:
                key, _, value = line.partition(":")
                # x86 says "model name"; some Arm kernels say "Model" or "Hardware".
                if key.strip().lower() in ("model name", "model", "hardware") and value.strip():
                    if not value.strip().isdigit():
                        return value.strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or NA("CPU model not reported")


def probe_cpu() -> CpuFacts:
    import torch

    physical = psutil.cpu_count(logical=False)
    logical = psutil.cpu_count(logical=True) or os.cpu_count()
    try:
        freq = psutil.cpu_freq()
    except Exception:  # some containers and VMs raise instead of returning None
        freq = None
    freq_mhz: float | NA = NA("CPU frequency not reported (container or VM)")
    if freq is not None:
        best = freq.max if freq.max and freq.max > 0 else freq.current
        if best and best > 0:
            freq_mhz = float(best)
    return CpuFacts(
        model=cpu_model(),
        physical_cores=physical if physical else NA("physical core count not reported"),
        logical_cores=logical if logical else NA("logical core count not reported"),
        freq_mhz=freq_mhz,
        ram_total_bytes=int(psutil.virtual_memory().total),
        torch_threads=int(torch.get_num_threads()),
        mkldnn_available=bool(torch.backends.mkldnn.is_available()),
    )


def probe_device(nvml: Nvml | None = None, cuda: CudaBackend | None = None) -> DeviceReport:
    """Everything we can learn about this box; never raises for a missing GPU, driver or NVML."""
    import torch

    nvml = nvml if nvml is not None else default_nvml()
    cuda = cuda if cuda is not None else TorchCudaBackend()
    try:
        cuda_available = bool(cuda.is_available())
        cuda_reason = None if cuda_available else (cuda.unavailable_reason() or "CUDA not available")
    except Exception as exc:
        cuda_available, cuda_reason = False, f"CUDA check failed: {exc}"
    gpus: list[GpuFacts] = []
    if cuda_available:
        count = _safe(cuda.device_count, 0)
        gpus = [_gpu_from_cuda(i, nvml, cuda) for i in range(count)]
    elif nvml.available:
        gpus = [_gpu_from_nvml(j, nvml, f"torch cannot use it: {cuda_reason}") for j in range(nvml.device_count())]
    runtime = _safe(cuda.runtime_version, None)
    return DeviceReport(
        torch_version=str(torch.__version__),  # a TorchVersion would pickle as a torch class
        cuda_available=cuda_available,
        cuda_reason=cuda_reason,
        cuda_runtime=runtime if runtime else NA("torch was built without CUDA"),
        cudnn_version=format_cudnn_version(_safe(cuda.cudnn_version, None)),
        driver_version=_driver_version(nvml),
        nvml_available=nvml.available,
        nvml_reason=None if nvml.available else (nvml.reason or "NVML not available"),
        gpus=gpus,
        cpu=_safe(probe_cpu, None) or _cpu_unknown(),
        topology=probe_topology(nvml),
    )


def _safe(function: Any, default: Any) -> Any:
    """Call `function()`; a probe must describe a broken piece of the box, not die of it."""
    try:
        return function()
    except Exception:
        return default


def _cpu_unknown() -> CpuFacts:
    missing = NA("CPU probe failed")
    return CpuFacts(missing, missing, missing, missing, missing, missing, missing)
