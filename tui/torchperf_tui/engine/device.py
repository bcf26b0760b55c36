"""Device facts: what GPU/CPU this is, and its theoretical peaks with the arithmetic shown.

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

from torchperf_tui.engine.nvml import NA, Nvml, default_nvml, to_jsonable
from torchperf_tui.formatting import is_positive_number

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
# Peak figures
# --------------------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class ArchSpec:
    """Per-SM throughput of one compute capability, from NVIDIA's architecture whitepapers."""

    name: str
    fp32_cores_per_sm: int
    # Dense FP16 tensor FLOP per clock per SM at full rate (FP32 accumulate on data-centre and pro parts).
    tensor_flops_per_clk_sm: int
    bf16_tensor: bool
    # GeForce parts of these generations run FP16 tensor math with FP32 accumulate (what PyTorch uses)
    # at half rate, per the Turing/GA102/AD102 whitepapers.
    geforce_half_rate: bool = False


# Check: A100 (8.0): 1410 MHz x 108 SMs x 64 x 2 = 19.5 TFLOPS FP32; x 2048 = 311.9 TFLOPS FP16/BF16.
#        H100 SXM (9.0): 1980 MHz x 132 x 128 x 2 = 66.9 TFLOPS FP32; 1830 MHz x 132 x 4096 = 989.4 TFLOPS.
#        V100 SXM2 (7.0): 1530 MHz x 80 x 64 x 2 = 15.7 TFLOPS; x 1024 = 125.3 TFLOPS FP16.
#        T4 (7.5): 1590 MHz x 40 x 64 x 2 = 8.1 TFLOPS; x 1024 = 65.1 TFLOPS FP16.
#        A10 (8.6): 1695 MHz x 72 x 128 x 2 = 31.2 TFLOPS; x 1024 = 125 TFLOPS.
#        L40S (8.9): 2520 MHz x 142 x 128 x 2 = 91.6 TFLOPS; x 1024 = 366 TFLOPS.
ARCH_SPECS: dict[tuple[int, int], ArchSpec] = {
    (7, 0): ArchSpec("Volta", 64, 1024, bf16_tensor=False),
    (7, 5): ArchSpec("Turing", 64, 1024, bf16_tensor=False, geforce_half_rate=True),
    (8, 0): ArchSpec("Ampere (GA100)", 64, 2048, bf16_tensor=True),
    (8, 6): ArchSpec("Ampere (GA10x)", 128, 1024, bf16_tensor=True, geforce_half_rate=True),
    (8, 9): ArchSpec("Ada Lovelace", 128, 1024, bf16_tensor=True, geforce_half_rate=True),
    (9, 0): ArchSpec("Hopper", 128, 4096, bf16_tensor=True),
}

# NVIDIA quotes Hopper tensor peaks at a lower clock than its FP32 peak (power-limited under tensor load):
# H100 SXM / H200 / GH200 (132 SMs): 1830 MHz -> 989.4 TFLOPS; H100 PCIe (114 SMs): 1620 MHz -> 756 TFLOPS.
# Keyed by (compute capability, SM count); every other part uses its max SM clock.
DATASHEET_TENSOR_CLOCK_MHZ: dict[tuple[int, int, int], int] = {
    (9, 0, 132): 1830,
    (9, 0, 114): 1620,
}


@dataclasses.dataclass
class PeakFigures:
    fp32_tflops: float | NA
    fp16_tensor_tflops: float | NA
    bf16_tensor_tflops: float | NA
    bandwidth_gbs: float | NA
    formulas: dict[str, str]


def _parse_cc(compute_capability: str | tuple[int, int] | NA) -> tuple[int, int] | None:
    if isinstance(compute_capability, tuple):
        return compute_capability
    if isinstance(compute_capability, str) and "." in compute_capability:
        major, minor = compute_capability.split(".", 1)
        if major.isdigit() and minor.isdigit():
            return int(major), int(minor)
    return None


_num = is_positive_number  # formatting's one check of a finite number above zero


def _first_na(*values: Any, default: str) -> NA:
    """The reason a formula input is missing: the first NA among them, else `default`."""
    for value in values:
        if isinstance(value, NA):
            return value
    return NA(default)


def peak_figures(compute_capability: str | tuple[int, int] | NA, sm_count: int | NA,
                 max_sm_clock_mhz: float | NA, max_mem_clock_mhz: float | NA,
                 memory_bus_width_bits: int | NA, name: str | NA = "",
                 clock_source: str = "NVML", mem_source: str = "NVML") -> PeakFigures:
    """Theoretical peaks from clocks, SM count and the per-architecture table, each with its formula.

    FP32 = max SM clock x SMs x FP32 cores/SM x 2 (an FMA is two FLOPs).
    Tensor = clock x SMs x dense tensor FLOP/clk/SM.
    Bandwidth = max memory clock x bus width / 8 x 2 (double data rate, as NVML reports the clock).
    """
    formulas: dict[str, str] = {}
    cc = _parse_cc(compute_capability)
    cc_text = f"sm_{cc[0]}{cc[1]}" if cc else "this GPU"
    spec = ARCH_SPECS.get(cc) if cc else None
    clock_label = "max SM clock" + ("" if clock_source == "NVML" else f" from {clock_source}")

    fp32: float | NA
    fp16: float | NA
    bf16: float | NA
    if cc is None:
        fp32 = fp16 = bf16 = NA("unknown compute capability")
    elif spec is None:
        fp32 = NA(f"unknown cores/SM for {cc_text}")
        fp16 = bf16 = NA(f"unknown tensor FLOP/clk/SM for {cc_text}")
    elif not (_num(max_sm_clock_mhz) and _num(sm_count)):
        fp32 = fp16 = bf16 = _first_na(max_sm_clock_mhz, sm_count, default="max SM clock or SM count unknown")
    else:
        clock = float(max_sm_clock_mhz)
        fp32 = clock * 1e6 * sm_count * spec.fp32_cores_per_sm * 2 / 1e12
        formulas["fp32"] = (f"{clock:.0f} MHz ({clock_label}) x {sm_count} SMs x {spec.fp32_cores_per_sm} "
                            f"FP32 cores x 2 = {fp32:.1f} TFLOPS")
        tensor_clock = clock
        clock_note = clock_label
        datasheet = DATASHEET_TENSOR_CLOCK_MHZ.get((cc[0], cc[1], int(sm_count)))
        if datasheet is not None and datasheet < clock:
            tensor_clock = float(datasheet)
            clock_note = f"NVIDIA's datasheet clock for tensor work; {clock_label} {clock:.0f} MHz"
        per_sm = spec.tensor_flops_per_clk_sm
        rate_note = ""
        if spec.geforce_half_rate and isinstance(name, str) and "geforce" in name.lower():
            per_sm //= 2
            rate_note = ", half rate: GeForce with FP32 accumulate"
        fp16 = tensor_clock * 1e6 * sm_count * per_sm / 1e12
        formulas["fp16_tensor"] = (f"{tensor_clock:.0f} MHz ({clock_note}) x {sm_count} SMs x {per_sm} dense "
                                   f"FLOP/clk/SM{rate_note} = {fp16:.1f} TFLOPS")
        if spec.bf16_tensor:
            bf16 = fp16
            formulas["bf16_tensor"] = formulas["fp16_tensor"].replace(" = ", " (same as FP16) = ", 1)
        else:
            bf16 = NA(f"no BF16 tensor cores on {cc_text} ({spec.name})")

    bandwidth: float | NA
    if _num(max_mem_clock_mhz) and _num(memory_bus_width_bits):
        mem_clock = float(max_mem_clock_mhz)
        bandwidth = mem_clock * 1e6 * memory_bus_width_bits / 8 * 2 / 1e9
        mem_label = "max memory clock" + ("" if mem_source == "NVML" else f" from {mem_source}")
        formulas["bandwidth"] = (f"{mem_clock:.0f} MHz ({mem_label}) x {memory_bus_width_bits} bits / 8 x 2 "
                                 f"(double data rate) = {bandwidth:.1f} GB/s")
    else:
        bandwidth = _first_na(max_mem_clock_mhz, memory_bus_width_bits,
                              default="max memory clock or bus width unknown")
    return PeakFigures(fp32, fp16, bf16, bandwidth, formulas)


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
    return int(value) if _num(value) else (value if isinstance(value, NA) else NA(reason))


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
    if isinstance(sm_mhz, NA) and _num(getattr(props, "clock_rate", None)):
        sm_mhz, clock_source = int(props.clock_rate) // 1000, "torch"
    if isinstance(mem_mhz, NA) and _num(getattr(props, "memory_clock_rate", None)):
        mem_mhz, mem_source = int(props.memory_clock_rate) // 1000, "torch"
    if isinstance(bus, NA) and _num(getattr(props, "memory_bus_width", None)):
        bus = int(props.memory_bus_width)
        mem_source = "torch" if mem_source == "torch" else "NVML, bus width from torch"
    power = nv("nvmlDeviceGetEnforcedPowerLimit")
    power_w = power / 1000.0 if _num(power) else _int_or(power, "NVML gave no power limit")
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
        nvml_index=j,
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
        power_limit_w=power / 1000.0 if _num(power) else _int_or(power, "no power limit"),
        peak_fp32_tflops=peaks.fp32_tflops, peak_fp16_tensor_tflops=peaks.fp16_tensor_tflops,
        peak_bf16_tensor_tflops=peaks.bf16_tensor_tflops, peak_bandwidth_gbs=peaks.bandwidth_gbs,
        formulas=peaks.formulas, architecture=missing, nvml_index=index,
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
