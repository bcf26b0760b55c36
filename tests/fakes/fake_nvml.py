"""A fake `pynvml` module: same function names, constants and NVMLError as nvidia-ml-py.

Pass an instance wherever the engine takes an NVML module: `Nvml.open(module=FakeNvml(...))`.

    fake = FakeNvml(gpus=[FakeGpu(name="NVIDIA H100 80GB HBM3")])
    fake.fail("nvmlDeviceGetPowerUsage", NVML_ERROR_NOT_SUPPORTED)   # every later call raises
    fake.fail("nvmlDeviceGetTemperature", NVML_ERROR_GPU_IS_LOST, times=1)  # only the next call
    fake.fail_init(NVML_ERROR_LIB_RM_VERSION_MISMATCH)               # nvmlInit raises
    fake.lose(1)                                                     # every query of GPU 1 raises GPU_IS_LOST
    fake.gpus[0].memory_used = 10 * GiB                              # the next sample sees it
    fake.calls["nvmlDeviceGetMaxClockInfo"]                          # how often a function was called
    box = eight_gpu_box()                                            # 8 GPUs: NVLink pairs, PCIe switches, 2 NUMA nodes

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
NVML_FEATURE_DISABLED = 0
NVML_FEATURE_ENABLED = 1
NVML_NVLINK_MAX_LINKS = 18
NVML_NVLINK_DEVICE_TYPE_GPU = 0
NVML_NVLINK_DEVICE_TYPE_SWITCH = 2
NVML_TOPOLOGY_INTERNAL = 0
NVML_TOPOLOGY_SINGLE = 10
NVML_TOPOLOGY_MULTIPLE = 20
NVML_TOPOLOGY_HOSTBRIDGE = 30
NVML_TOPOLOGY_NODE = 40
NVML_TOPOLOGY_SYSTEM = 50
NVML_P2P_CAPS_INDEX_READ = 0
NVML_P2P_CAPS_INDEX_WRITE = 1
NVML_P2P_STATUS_OK = 0
NVML_P2P_STATUS_CHIPSET_NOT_SUPPORTED = 1
NVML_P2P_STATUS_GPU_NOT_SUPPORTED = 2
NVML_P2P_STATUS_IOH_TOPOLOGY_NOT_SUPPORTED = 3
NVML_P2P_STATUS_DISABLED_BY_REGKEY = 4
NVML_P2P_STATUS_NOT_SUPPORTED = 5
NVML_P2P_STATUS_UNKNOWN = 6
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
    # Where it sits: its PCI bus id, NUMA node (None: NVML says not supported), the CPUs close to it, the PCIe link's
    # maximum generation and width, and its active NVLinks, each as (the remote end's bus id, NVML_NVLINK_DEVICE_TYPE_*)
    pci_bus_id: str = "00000000:18:00.0"
    numa_node: int | None = 0
    cpus: tuple[int, ...] = ()
    pcie_gen: int = 5
    pcie_width: int = 16
    nvlinks: tuple[tuple[str, int], ...] = ()


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
        # The PCIe path between two GPUs (NVML_TOPOLOGY_*; SYSTEM where not given) and their P2P status per
        # capability (NVML_P2P_CAPS_INDEX_*; OK where not given), keyed by the pair's indices in either order.
        self.paths: dict[frozenset, int] = {}
        self.p2p: dict[tuple[frozenset, int], int] = {}

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


    # -- where each GPU sits: PCI, NUMA, CPU affinity, PCIe, NVLink, the path between two GPUs, P2P ------------
    def nvmlDeviceGetPciInfo(self, handle):
        gpu = self._enter("nvmlDeviceGetPciInfo", handle)
        return SimpleNamespace(busId=self._text(gpu, gpu.pci_bus_id))

    def nvmlDeviceGetNumaNodeId(self, handle) -> int:
        gpu = self._enter("nvmlDeviceGetNumaNodeId", handle)
        if gpu.numa_node is None:
            raise NVMLError(NVML_ERROR_NOT_SUPPORTED)
        return gpu.numa_node

    def nvmlDeviceGetCpuAffinity(self, handle, cpu_set_size: int):
        gpu = self._enter("nvmlDeviceGetCpuAffinity", handle)
        words = [0] * cpu_set_size
        for cpu in gpu.cpus:
            if cpu // 64 < cpu_set_size:
                words[cpu // 64] |= 1 << (cpu % 64)
        return words

    def nvmlDeviceGetMaxPcieLinkGeneration(self, handle) -> int:
        return self._enter("nvmlDeviceGetMaxPcieLinkGeneration", handle).pcie_gen

    def nvmlDeviceGetMaxPcieLinkWidth(self, handle) -> int:
        return self._enter("nvmlDeviceGetMaxPcieLinkWidth", handle).pcie_width

    def _link(self, function: str, handle, link: int) -> tuple[str, int] | None:
        gpu = self._enter(function, handle)
        if not gpu.nvlinks:
            raise NVMLError(NVML_ERROR_NOT_SUPPORTED)  # a GPU without NVLink
        if not 0 <= link < NVML_NVLINK_MAX_LINKS:
            raise NVMLError(NVML_ERROR_INVALID_ARGUMENT)
        return gpu.nvlinks[link] if link < len(gpu.nvlinks) else None

    def nvmlDeviceGetNvLinkState(self, handle, link: int) -> int:
        found = self._link("nvmlDeviceGetNvLinkState", handle, link)
        return NVML_FEATURE_ENABLED if found else NVML_FEATURE_DISABLED

    def nvmlDeviceGetNvLinkRemotePciInfo(self, handle, link: int):
        found = self._link("nvmlDeviceGetNvLinkRemotePciInfo", handle, link)
        if found is None:
            raise NVMLError(NVML_ERROR_NOT_SUPPORTED)  # an inactive link has no remote end
        return SimpleNamespace(busId=found[0])

    def nvmlDeviceGetNvLinkRemoteDeviceType(self, handle, link: int) -> int:
        found = self._link("nvmlDeviceGetNvLinkRemoteDeviceType", handle, link)
        if found is None:
            raise NVMLError(NVML_ERROR_NOT_SUPPORTED)
        return found[1]

    def nvmlDeviceGetTopologyCommonAncestor(self, first, second) -> int:
        self._enter("nvmlDeviceGetTopologyCommonAncestor", first)
        self._enter("nvmlDeviceGetTopologyCommonAncestor", second)
        return self.paths.get(frozenset((first.index, second.index)), NVML_TOPOLOGY_SYSTEM)

    def nvmlDeviceGetP2PStatus(self, first, second, capability: int) -> int:
        self._enter("nvmlDeviceGetP2PStatus", first)
        self._enter("nvmlDeviceGetP2PStatus", second)
        return self.p2p.get((frozenset((first.index, second.index)), capability), NVML_P2P_STATUS_OK)


def cpu_range(first: int, last: int) -> tuple[int, ...]:
    return tuple(range(first, last + 1))


# The eight-GPU box of the topology tests: A100 PCIe cards bridged by NVLink in pairs (12 links each way),
# under PCIe switches two by two, four GPUs per NUMA node (each node's CPUs 0-31,64-95 and 32-63,96-127).
EIGHT_GPU_BUS_IDS = tuple(f"00000000:{bus}:00.0" for bus in ("18", "2A", "3A", "5D", "9A", "AB", "BA", "DB"))


def eight_gpu_box() -> FakeNvml:
    """As `nvidia-smi topo -m` would show it:
    GPU0-1, 2-3, 4-5, 6-7 NV12 (bridged pairs, under one PCIe switch each);
    GPU0/1 to GPU2/3: PXB (several PCIe switches, no host bridge);
    GPU4/5 to GPU6/7: NODE (two host bridges of one NUMA node);
    GPU0-3 to GPU4-7: SYS (across the NUMA nodes), where P2P reads and writes are not supported by the chipset;
    GPU6 and GPU7 cannot write to each other (GNS: a GPU that does not support it), though they read.
    """
    gpus = []
    for index, bus in enumerate(EIGHT_GPU_BUS_IDS):
        peer = EIGHT_GPU_BUS_IDS[index ^ 1]
        node = index // 4
        cpus = cpu_range(0, 31) + cpu_range(64, 95) if node == 0 else cpu_range(32, 63) + cpu_range(96, 127)
        gpus.append(FakeGpu(name="NVIDIA A100 80GB PCIe", uuid=f"GPU-00000000-0000-0000-0000-00000000000{index}",
                            compute_capability=(8, 0), pci_bus_id=bus, numa_node=node, cpus=cpus, pcie_gen=4,
                            nvlinks=((peer, NVML_NVLINK_DEVICE_TYPE_GPU),) * 12))
    box = FakeNvml(gpus=gpus)
    for a in range(8):
        for b in range(a + 1, 8):
            pair = frozenset((a, b))
            if a // 4 != b // 4:
                box.paths[pair] = NVML_TOPOLOGY_SYSTEM
                for capability in (NVML_P2P_CAPS_INDEX_READ, NVML_P2P_CAPS_INDEX_WRITE):
                    box.p2p[(pair, capability)] = NVML_P2P_STATUS_CHIPSET_NOT_SUPPORTED
            elif a // 2 == b // 2:
                box.paths[pair] = NVML_TOPOLOGY_SINGLE
            else:
                box.paths[pair] = NVML_TOPOLOGY_MULTIPLE if a < 4 else NVML_TOPOLOGY_NODE
    box.p2p[(frozenset((6, 7)), NVML_P2P_CAPS_INDEX_WRITE)] = NVML_P2P_STATUS_GPU_NOT_SUPPORTED
    return box


def switch_box(gpus: int = 8) -> FakeNvml:
    """H100 SXM GPUs whose 18 NVLinks each go to the NVSwitches (NV18 between every pair), one NUMA node."""
    switch = NVML_NVLINK_DEVICE_TYPE_SWITCH
    box = FakeNvml(gpus=[FakeGpu(uuid=f"GPU-00000000-0000-0000-0000-00000000010{i}",
                                 pci_bus_id=f"00000000:{i + 1:02X}:00.0", cpus=cpu_range(0, 63),
                                 nvlinks=tuple((f"00000000:F{link % 4}:00.0", switch) for link in range(18)))
                         for i in range(gpus)])
    for a in range(gpus):
        for b in range(a + 1, gpus):
            box.paths[frozenset((a, b))] = NVML_TOPOLOGY_NODE
    return box


def _pick_clock(sm: int, mem: int, clock_type: int) -> int:
    if clock_type in (NVML_CLOCK_SM, NVML_CLOCK_GRAPHICS):
        return sm
    if clock_type == NVML_CLOCK_MEM:
        return mem
    raise NVMLError(NVML_ERROR_NOT_SUPPORTED)
