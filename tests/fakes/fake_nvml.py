"""A fake `pynvml` module: same function names, constants and NVMLError as nvidia-ml-py.

Pass an instance wherever the engine takes an NVML module: `Nvml.open(module=FakeNvml(...))`.

    fake = FakeNvml(gpus=[FakeGpu(name="NVIDIA H100 80GB HBM3")])
    fake.fail("nvmlDeviceGetPowerUsage", NVML_ERROR_NOT_SUPPORTED)   # every later call raises
    fake.fail("nvmlDeviceGetTemperature", NVML_ERROR_GPU_IS_LOST, times=1)  # only the next call
    fake.fail_init(NVML_ERROR_LIB_RM_VERSION_MISMATCH)               # nvmlInit raises
    fake.lose(1)                                                     # every query of GPU 1 raises GPU_IS_LOST
    fake.gpus[0].memory_used = 10 * GiB                              # the next sample sees it
    fake.calls["nvmlDeviceGetMaxClockInfo"]                          # how often a function was called

Units follow NVML: bytes for memory, mW for power, MHz for clocks, percent for utilisation, Celsius.
The constant values are NVML's ABI numbers, the same as in pynvml.py.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from types import SimpleNamespace

GiB = 1024**3
MiB = 1024**2

NVML_SUCCESS = 0
NVML_ERROR_UNINITIALIZED = 1
NVML_ERROR_INVALID_ARGUMENT = 2
NVML_ERROR_NOT_SUPPORTED = 3
NVML_ERROR_NO_PERMISSION = 4
NVML_ERROR_ALREADY_INITIALIZED = 5
NVML_ERROR_NOT_FOUND = 6
NVML_ERROR_INSUFFICIENT_SIZE = 7
NVML_ERROR_INSUFFICIENT_POWER = 8
NVML_ERROR_DRIVER_NOT_LOADED = 9
NVML_ERROR_TIMEOUT = 10
NVML_ERROR_IRQ_ISSUE = 11
NVML_ERROR_LIBRARY_NOT_FOUND = 12
NVML_ERROR_FUNCTION_NOT_FOUND = 13
NVML_ERROR_CORRUPTED_INFOROM = 14
NVML_ERROR_GPU_IS_LOST = 15
NVML_ERROR_RESET_REQUIRED = 16
NVML_ERROR_OPERATING_SYSTEM = 17
NVML_ERROR_LIB_RM_VERSION_MISMATCH = 18
NVML_ERROR_IN_USE = 19
NVML_ERROR_MEMORY = 20
NVML_ERROR_NO_DATA = 21
NVML_ERROR_UNKNOWN = 999

NVML_TEMPERATURE_GPU = 0
NVML_CLOCK_GRAPHICS = 0
NVML_CLOCK_SM = 1
NVML_CLOCK_MEM = 2
NVML_CLOCK_VIDEO = 3

_ERROR_STRINGS = {
    NVML_ERROR_UNINITIALIZED: "Uninitialized",
    NVML_ERROR_NOT_SUPPORTED: "Not Supported",
    NVML_ERROR_NO_PERMISSION: "Insufficient Permissions",
    NVML_ERROR_DRIVER_NOT_LOADED: "Driver Not Loaded",
    NVML_ERROR_LIBRARY_NOT_FOUND: "NVML Shared Library Not Found",
    NVML_ERROR_GPU_IS_LOST: "GPU is lost",
    NVML_ERROR_LIB_RM_VERSION_MISMATCH: "RM has detected an NVML/RM version mismatch.",
    NVML_ERROR_UNKNOWN: "Unknown Error",
}

# What the engine's reason for an NVML error holds, by code (the words a test looks for in an NA's reason).
REASON_WORDS = {
    NVML_ERROR_LIBRARY_NOT_FOUND: "not found",
    NVML_ERROR_LIB_RM_VERSION_MISMATCH: "versions differ",
    NVML_ERROR_DRIVER_NOT_LOADED: "driver not loaded",
    NVML_ERROR_NO_PERMISSION: "no permission",
    NVML_ERROR_NOT_SUPPORTED: "not supported",
    NVML_ERROR_GPU_IS_LOST: "GPU is lost",
    NVML_ERROR_UNKNOWN: "unknown NVML error",
}


def reason_words(*codes: int) -> list[tuple[int, str]]:
    """(code, the words of its reason) for each code, in order: a `("code", "words")` parametrize list."""
    return [(code, REASON_WORDS[code]) for code in codes]


# The errors a query can meet on a running GPU, for the tests that fail one query with each.
QUERY_ERRORS = reason_words(NVML_ERROR_NOT_SUPPORTED, NVML_ERROR_GPU_IS_LOST, NVML_ERROR_NO_PERMISSION,
                            NVML_ERROR_LIB_RM_VERSION_MISMATCH)


class NVMLError(Exception):
    """Like pynvml.NVMLError: `.value` is the NVML error code."""

    def __init__(self, value: int) -> None:
        super().__init__(value)
        self.value = value

    def __str__(self) -> str:
        return _ERROR_STRINGS.get(self.value, f"NVML Error with code {self.value}")


@dataclasses.dataclass
class FakeGpu:
    """One fake GPU as NVML sees it. Defaults are an idle H100 SXM (datasheet values, not measurements)."""

    name: str = "NVIDIA H100 80GB HBM3"
    uuid: str = "GPU-00000000-0000-0000-0000-000000000000"
    compute_capability: tuple[int, int] = (9, 0)
    memory_total: int = 81559 * MiB
    memory_used: int = 512 * MiB
    util_gpu: int = 0
    util_mem: int = 0
    temperature_c: int = 31
    power_mw: int = 70_000
    power_limit_mw: int = 700_000
    sm_clock_mhz: int = 345
    mem_clock_mhz: int = 2619
    max_sm_clock_mhz: int = 1980
    max_mem_clock_mhz: int = 2619
    memory_bus_width_bits: int = 5120
    clock_event_reasons: int = 0x1  # nvmlClocksEventReason* bits: idle
    energy_mj: int = 1_000_000  # the total energy counter, millijoules since the driver loaded
    name_as_bytes: bool = False  # older nvidia-ml-py releases return bytes for strings
    processes: dict = dataclasses.field(default_factory=dict)  # pid -> used GPU memory in bytes (None: n/a)
    graphics_processes: dict = dataclasses.field(default_factory=dict)  # likewise, the graphics (and video) ones
    process_sm: dict = dataclasses.field(default_factory=dict)  # pid -> SM % in NVML's per-process samples
    mig_mode: int | None = None  # 1: MIG on, 0: off; None: not supported (no MIG on this GPU)
    pcie_link: tuple[int, int, int, int] = (5, 16, 5, 16)  # current generation and width, then their maxima
    # GPM (Hopper and later): NVML_GPM_METRIC_* id -> the percent every pair of samples reads; None: no GPM
    gpm: dict | None = None


@dataclasses.dataclass(frozen=True)
class FakeHandle:
    index: int


class FakeNvml:
    """A module-like stand-in for `pynvml` with configurable GPUs and injectable errors."""

    NVMLError = NVMLError

    def __init__(self, gpus: list[FakeGpu] | None = None, driver_version: str = "580.159.04",
                 cuda_driver_version: int = 13000) -> None:
        self.gpus: list[FakeGpu] = list(gpus) if gpus is not None else [FakeGpu()]
        self.driver_version = driver_version
        self.cuda_driver_version = cuda_driver_version
        self.initialized = False
        self.calls: Counter[str] = Counter()
        self._failures: dict[str, tuple[int, int | None]] = {}
        self._init_error: int | None = None
        self._lost: dict[int, int] = {}  # GPU index -> the error every query of its handle raises

    def __getattr__(self, name: str):
        # The NVML_* constants live at module level here; expose them on the instance like pynvml does.
        if name.startswith("NVML_") and name in globals():
            return globals()[name]
        raise AttributeError(name)

    # -- controls for tests -------------------------------------------------------------------------------
    def fail(self, function: str, code: int, times: int | None = None) -> None:
        """Make `function` raise NVMLError(code): on every later call, or on the next `times` calls."""
        self._failures[function] = (code, times)

    def fail_init(self, code: int) -> None:
        """Make nvmlInit raise NVMLError(code) (library missing, driver mismatch, ...)."""
        self._init_error = code

    def lose(self, index: int, code: int = NVML_ERROR_GPU_IS_LOST) -> None:
        """Make every later query of GPU `index` (through its handle) raise NVMLError(code): it fell off the bus."""
        self._lost[index] = code

    def clear_failures(self) -> None:
        self._failures.clear()
        self._lost.clear()
        self._init_error = None

    def _enter(self, function: str, handle: FakeHandle | None = None) -> FakeGpu | None:
        self.calls[function] += 1
        if not self.initialized:
            raise NVMLError(NVML_ERROR_UNINITIALIZED)
        failure = self._failures.get(function)
        if failure is not None:
            code, times = failure
            if times is not None:
                if times <= 1:
                    del self._failures[function]
                else:
                    self._failures[function] = (code, times - 1)
            raise NVMLError(code)
        if handle is None:
            return None
        if isinstance(handle, FakeHandle) and handle.index in self._lost:
            raise NVMLError(self._lost[handle.index])
        if not isinstance(handle, FakeHandle) or not 0 <= handle.index < len(self.gpus):
            raise NVMLError(NVML_ERROR_INVALID_ARGUMENT)
        return self.gpus[handle.index]

    def _text(self, gpu: FakeGpu | None, value: str):
        return value.encode() if gpu is not None and gpu.name_as_bytes else value

    # -- the pynvml surface the engine uses ----------------------------------------------------------------
    def nvmlInit(self) -> None:
        self.calls["nvmlInit"] += 1
        if self._init_error is not None:
            raise NVMLError(self._init_error)
        self.initialized = True

    def nvmlShutdown(self) -> None:
        self._enter("nvmlShutdown")
        self.initialized = False

    def nvmlSystemGetDriverVersion(self):
        self._enter("nvmlSystemGetDriverVersion")
        return self._text(self.gpus[0] if self.gpus else None, self.driver_version)

    def nvmlSystemGetCudaDriverVersion(self) -> int:
        self._enter("nvmlSystemGetCudaDriverVersion")
        return self.cuda_driver_version

    def nvmlDeviceGetCount(self) -> int:
        self._enter("nvmlDeviceGetCount")
        return len(self.gpus)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> FakeHandle:
        self._enter("nvmlDeviceGetHandleByIndex")
        if not 0 <= index < len(self.gpus):
            raise NVMLError(NVML_ERROR_INVALID_ARGUMENT)
        return FakeHandle(index)

    def nvmlDeviceGetName(self, handle):
        gpu = self._enter("nvmlDeviceGetName", handle)
        return self._text(gpu, gpu.name)

    def nvmlDeviceGetUUID(self, handle):
        gpu = self._enter("nvmlDeviceGetUUID", handle)
        return self._text(gpu, gpu.uuid)

    def nvmlDeviceGetCudaComputeCapability(self, handle) -> tuple[int, int]:
        return self._enter("nvmlDeviceGetCudaComputeCapability", handle).compute_capability

    def nvmlDeviceGetMemoryInfo(self, handle, version=None):
        gpu = self._enter("nvmlDeviceGetMemoryInfo", handle)
        used = min(gpu.memory_used, gpu.memory_total)
        return SimpleNamespace(total=gpu.memory_total, used=used, free=gpu.memory_total - used)

    def nvmlDeviceGetUtilizationRates(self, handle):
        gpu = self._enter("nvmlDeviceGetUtilizationRates", handle)
        return SimpleNamespace(gpu=gpu.util_gpu, memory=gpu.util_mem)

    def nvmlDeviceGetTemperature(self, handle, sensor: int) -> int:
        gpu = self._enter("nvmlDeviceGetTemperature", handle)
        if sensor != NVML_TEMPERATURE_GPU:
            raise NVMLError(NVML_ERROR_INVALID_ARGUMENT)
        return gpu.temperature_c

    def nvmlDeviceGetPowerUsage(self, handle) -> int:
        return self._enter("nvmlDeviceGetPowerUsage", handle).power_mw

    def nvmlDeviceGetEnforcedPowerLimit(self, handle) -> int:
        return self._enter("nvmlDeviceGetEnforcedPowerLimit", handle).power_limit_mw

    def nvmlDeviceGetClockInfo(self, handle, clock_type: int) -> int:
        gpu = self._enter("nvmlDeviceGetClockInfo", handle)
        return _pick_clock(gpu.sm_clock_mhz, gpu.mem_clock_mhz, clock_type)

    def nvmlDeviceGetMaxClockInfo(self, handle, clock_type: int) -> int:
        gpu = self._enter("nvmlDeviceGetMaxClockInfo", handle)
        return _pick_clock(gpu.max_sm_clock_mhz, gpu.max_mem_clock_mhz, clock_type)

    def nvmlDeviceGetComputeRunningProcesses(self, handle):
        gpu = self._enter("nvmlDeviceGetComputeRunningProcesses", handle)
        return [SimpleNamespace(pid=pid, usedGpuMemory=used) for pid, used in gpu.processes.items()]

    def nvmlDeviceGetGraphicsRunningProcesses(self, handle):
        gpu = self._enter("nvmlDeviceGetGraphicsRunningProcesses", handle)
        return [SimpleNamespace(pid=pid, usedGpuMemory=used) for pid, used in gpu.graphics_processes.items()]

    def nvmlDeviceGetProcessUtilization(self, handle, last_seen_us: int):
        gpu = self._enter("nvmlDeviceGetProcessUtilization", handle)
        if not gpu.process_sm:
            raise NVMLError(NVML_ERROR_NOT_FOUND)  # NVML's answer when it kept no samples
        return [SimpleNamespace(pid=pid, smUtil=sm, memUtil=0, timeStamp=last_seen_us + 1)
                for pid, sm in gpu.process_sm.items()]

    def nvmlDeviceGetCurrPcieLinkGeneration(self, handle) -> int:
        return self._enter("nvmlDeviceGetCurrPcieLinkGeneration", handle).pcie_link[0]

    def nvmlDeviceGetCurrPcieLinkWidth(self, handle) -> int:
        return self._enter("nvmlDeviceGetCurrPcieLinkWidth", handle).pcie_link[1]

    def nvmlDeviceGetMaxPcieLinkGeneration(self, handle) -> int:
        return self._enter("nvmlDeviceGetMaxPcieLinkGeneration", handle).pcie_link[2]

    def nvmlDeviceGetMaxPcieLinkWidth(self, handle) -> int:
        return self._enter("nvmlDeviceGetMaxPcieLinkWidth", handle).pcie_link[3]

    def nvmlDeviceGetMigMode(self, handle):
        gpu = self._enter("nvmlDeviceGetMigMode", handle)
        if gpu.mig_mode is None:
            raise NVMLError(NVML_ERROR_NOT_SUPPORTED)
        return [gpu.mig_mode, gpu.mig_mode]

    def nvmlDeviceGetMemoryBusWidth(self, handle) -> int:
        return self._enter("nvmlDeviceGetMemoryBusWidth", handle).memory_bus_width_bits

    def nvmlDeviceGetCurrentClocksEventReasons(self, handle) -> int:
        return self._enter("nvmlDeviceGetCurrentClocksEventReasons", handle).clock_event_reasons

    def nvmlDeviceGetTotalEnergyConsumption(self, handle) -> int:
        return self._enter("nvmlDeviceGetTotalEnergyConsumption", handle).energy_mj

    # -- GPM, as nvidia-ml-py wraps it: support, samples, and the metrics between two samples -------------
    NVML_GPM_METRICS_GET_VERSION = 1

    def nvmlGpmQueryDeviceSupport(self, handle):
        gpu = self._enter("nvmlGpmQueryDeviceSupport", handle)
        return SimpleNamespace(version=1, isSupportedDevice=int(gpu.gpm is not None))

    def nvmlGpmSampleAlloc(self):
        self._enter("nvmlGpmSampleAlloc")
        self.gpm_samples_alive = getattr(self, "gpm_samples_alive", 0) + 1
        return SimpleNamespace(gpu=None)

    def nvmlGpmSampleFree(self, sample) -> None:
        self._enter("nvmlGpmSampleFree")
        self.gpm_samples_alive -= 1

    def nvmlGpmSampleGet(self, handle, sample):
        self._enter("nvmlGpmSampleGet", handle)
        sample.gpu = handle.index
        return sample

    @staticmethod
    def c_nvmlGpmMetricsGet_t():
        return SimpleNamespace(version=0, numMetrics=0, sample1=None, sample2=None,
                               metrics=[SimpleNamespace(metricId=0, nvmlReturn=0, value=0.0) for _ in range(16)])

    def nvmlGpmMetricsGet(self, request):
        self._enter("nvmlGpmMetricsGet")
        gpu = self.gpus[request.sample1.gpu]
        for metric in request.metrics[:request.numMetrics]:
            if metric.metricId in (gpu.gpm or {}):
                metric.value = float(gpu.gpm[metric.metricId])
            else:
                metric.nvmlReturn = NVML_ERROR_NOT_SUPPORTED
        return request


def _pick_clock(sm: int, mem: int, clock_type: int) -> int:
    if clock_type in (NVML_CLOCK_SM, NVML_CLOCK_GRAPHICS):
        return sm
    if clock_type == NVML_CLOCK_MEM:
        return mem
    raise NVMLError(NVML_ERROR_NOT_SUPPORTED)
