"""How the GPUs of this box are linked, as `nvidia-smi topo -m` shows it, read through NVML (engine/hardware/nvml.py):
for each pair of GPUs their NVLinks (NV#) or else the PCIe path between them (PIX, PXB, PHB, NODE, SYS), whether one
can read and write the other's memory directly (P2P), and per GPU its NUMA node, the CPUs close to it and the peaks of
its NVLinks and its PCIe link; and from those, the peak a collective's bus bandwidth is held against.

GPUs are numbered as NVML numbers them (the PCI order nvidia-smi uses; CUDA_VISIBLE_DEVICES renumbers torch's).
A query NVML cannot answer is a "?" in the matrix with its reason in `notes`, once. No torch here.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from torchperf_tui.engine.hardware.device_peaks import nvlink_gbs, pcie_gbs
from torchperf_tui.engine.hardware.nvml import NA, Nvml, pcie_words, to_jsonable

# The common ancestor of two GPUs on the PCIe tree (NVML_TOPOLOGY_*, ABI values as defaults) and nvidia-smi's word.
PATHS = (("NVML_TOPOLOGY_INTERNAL", 0, "BRD"), ("NVML_TOPOLOGY_SINGLE", 10, "PIX"),
         ("NVML_TOPOLOGY_MULTIPLE", 20, "PXB"), ("NVML_TOPOLOGY_HOSTBRIDGE", 30, "PHB"),
         ("NVML_TOPOLOGY_NODE", 40, "NODE"), ("NVML_TOPOLOGY_SYSTEM", 50, "SYS"))
# P2P status (NVML_P2P_STATUS_*) and nvidia-smi's word for it (`nvidia-smi topo -p2p r`).
P2P_WORDS = (("NVML_P2P_STATUS_OK", 0, "OK"), ("NVML_P2P_STATUS_CHIPSET_NOT_SUPPORTED", 1, "CNS"),
             ("NVML_P2P_STATUS_GPU_NOT_SUPPORTED", 2, "GNS"), ("NVML_P2P_STATUS_IOH_TOPOLOGY_NOT_SUPPORTED", 3, "TNS"),
             ("NVML_P2P_STATUS_DISABLED_BY_REGKEY", 4, "DRK"), ("NVML_P2P_STATUS_NOT_SUPPORTED", 5, "NS"),
             ("NVML_P2P_STATUS_UNKNOWN", 6, "U"))
SELF = "X"
UNKNOWN = "?"
# The CPU affinity asked of NVML: 64 CPUs a word, as many words as Linux's largest CPU count (8192) takes.
CPU_SET_WORDS = 128
# NVML_NVLINK_MAX_LINKS where the module does not say it: the most links a GPU has had so far (Hopper, Blackwell).
MAX_LINKS_DEFAULT = 18


@dataclasses.dataclass
class GpuLinks:
    """One GPU's place in the box: its PCI bus id, NUMA node, the CPUs close to it ("0-31,64-95"), its active NVLinks
    and their peak, its PCIe link ("Gen4 x16", the link's maximum) and that link's peak, each way."""

    index: int
    bus_id: str | NA
    numa_node: int | NA
    cpu_affinity: str | NA
    nvlinks: int | NA
    nvlink_gbs: float | NA
    pcie: str | NA
    pcie_gbs: float | NA


@dataclasses.dataclass
class Topology:
    """The matrix: `links[i][j]` "X", "NV12", "PIX", "PXB", "PHB", "NODE", "SYS" (or "?"); `p2p_read[i][j]` and
    `p2p_write[i][j]` whether GPU i can read (write) GPU j's memory: "OK", "CNS", "GNS", "TNS", "DRK", "NS", "U" (or
    "?"); `notes` the reasons for each "?", once; `reason` why there is no matrix at all (no NVML, no GPU)."""

    gpus: list[GpuLinks] = dataclasses.field(default_factory=list)
    links: list[list[str]] = dataclasses.field(default_factory=list)
    p2p_read: list[list[str]] = dataclasses.field(default_factory=list)
    p2p_write: list[list[str]] = dataclasses.field(default_factory=list)
    notes: list[str] = dataclasses.field(default_factory=list)
    reason: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return to_jsonable(self)


def bus_key(value: Any) -> str | None:
    """A PCI bus id as NVML gives it (bytes or text, in a struct's busId) in one form: '00000000:18:00.0'."""
    value = getattr(value, "busId", value)
    if isinstance(value, bytes):
        value = value.decode(errors="replace")
    return value.strip().upper().rstrip("\x00") if isinstance(value, str) and value.strip() else None


def cpu_ranges(words: Any) -> str:
    """NVML's CPU mask (64-bit words, CPU 0 in the first word's lowest bit) as ranges: '0-31,64-95'."""
    cpus = [word_index * 64 + bit for word_index, word in enumerate(words) for bit in range(64) if int(word) >> bit & 1]
    ranges: list[str] = []
    start = previous = None
    for cpu in cpus + [None]:
        if cpu is not None and previous is not None and cpu == previous + 1:
            previous = cpu
            continue
        if start is not None:
            ranges.append(str(start) if start == previous else f"{start}-{previous}")
        start = previous = cpu
    return ",".join(ranges)


class Reader:
    """The queries of one probe, each failing one said once in `notes`."""

    def __init__(self, nvml: Nvml) -> None:
        self.nvml = nvml
        self.notes: list[str] = []

    def said(self, what: str, value: Any) -> Any:
        """`value`, and its reason noted (once) when it is NA."""
        if isinstance(value, NA):
            line = f"{what}: {value.reason}"
            if line not in self.notes:
                self.notes.append(line)
        return value

    def word(self, table: tuple, code: Any) -> str:
        for name, default, word in table:
            if code == self.nvml.const(name, default):
                return word
        return UNKNOWN


def nvlink_ends(nvml: Nvml, index: int) -> list[tuple[str | None, int]] | NA:
    """The remote ends of GPU `index`'s active NVLinks: (bus id, NVML_NVLINK_DEVICE_TYPE_*) each; [] for a GPU without
    NVLink (its first link not supported); NA when NVML cannot say."""
    ends: list[tuple[str | None, int]] = []
    for link in range(nvml.const("NVML_NVLINK_MAX_LINKS", MAX_LINKS_DEFAULT)):
        state = nvml.query(index, "nvmlDeviceGetNvLinkState", link)
        if isinstance(state, NA):
            if link == 0 and "not supported" not in state.reason:
                return state
            break  # no NVLink, or past this GPU's last link
        if state != nvml.const("NVML_FEATURE_ENABLED", 1):
            continue
        remote = nvml.query(index, "nvmlDeviceGetNvLinkRemotePciInfo", link)
        kind = nvml.query(index, "nvmlDeviceGetNvLinkRemoteDeviceType", link)
        ends.append((None if isinstance(remote, NA) else bus_key(remote),
                     kind if isinstance(kind, int) else nvml.const("NVML_NVLINK_DEVICE_TYPE_GPU", 0)))
    return ends


def gpu_links(nvml: Nvml, reader: Reader, index: int, ends: list | NA) -> GpuLinks:
    bus = nvml.query(index, "nvmlDeviceGetPciInfo")
    bus_id = bus if isinstance(bus, NA) else (bus_key(bus) or NA("NVML gave no bus id"))
    numa = nvml.query(index, "nvmlDeviceGetNumaNodeId")
    if isinstance(numa, int) and numa < 0:
        numa = NA("no NUMA node (a single-node box)")
    mask = nvml.query(index, "nvmlDeviceGetCpuAffinity", CPU_SET_WORDS)
    affinity = mask if isinstance(mask, NA) else (cpu_ranges(mask) or NA("NVML gave no CPU"))
    generation = nvml.query(index, "nvmlDeviceGetMaxPcieLinkGeneration")
    width = nvml.query(index, "nvmlDeviceGetMaxPcieLinkWidth")
    pcie = (pcie_words(generation, width) if isinstance(generation, int) and isinstance(width, int)
            else generation if isinstance(generation, NA) else width)
    links = ends if isinstance(ends, NA) else len(ends)
    cc = nvml.query(index, "nvmlDeviceGetCudaComputeCapability")
    nvlink = NA("no NVLink") if links == 0 else nvlink_gbs(tuple(cc) if isinstance(cc, (tuple, list)) else cc, links)
    return GpuLinks(index=index, bus_id=reader.said("PCI bus id", bus_id),
                    numa_node=reader.said("NUMA node", numa), cpu_affinity=reader.said("CPU affinity", affinity),
                    nvlinks=reader.said("NVLink", links), nvlink_gbs=nvlink,
                    pcie=reader.said("PCIe link", pcie), pcie_gbs=pcie_gbs(generation, width))


def nvlinks_between(nvml: Nvml, ends: list, first: GpuLinks, second: GpuLinks) -> int:
    """The NVLinks from `first` to `second`: those whose far end is `second`, or, where both reach NVSwitches, the
    fewer of their switch links (every GPU on the switches is reached through all of them)."""
    if isinstance(ends[first.index], NA) or isinstance(ends[second.index], NA):
        return 0
    switch = nvml.const("NVML_NVLINK_DEVICE_TYPE_SWITCH", 2)
    direct = sum(1 for bus, kind in ends[first.index] if kind != switch and bus and bus == second.bus_id)
    if direct:
        return direct
    switched = [sum(1 for _, kind in ends[g.index] if kind == switch) for g in (first, second)]
    return min(switched)


def probe_topology(nvml: Nvml) -> Topology:
    """The matrix of every GPU NVML sees; never raises (an NVML that is not there is `reason`)."""
    if not nvml.available:
        return Topology(reason=nvml.reason or "NVML not available")
    count = nvml.device_count()
    if count == 0:
        return Topology(reason="NVML sees no GPU")
    reader = Reader(nvml)
    ends = [nvlink_ends(nvml, i) for i in range(count)]
    gpus = [gpu_links(nvml, reader, i, ends[i]) for i in range(count)]
    links = [[SELF] * count for _ in range(count)]
    read = [[SELF] * count for _ in range(count)]
    write = [[SELF] * count for _ in range(count)]
    for i in range(count):
        for j in range(count):
            if i == j:
                continue
            if j > i:
                nv = nvlinks_between(nvml, ends, gpus[i], gpus[j])
                path = path_word(nvml, reader, i, j)
                links[i][j] = links[j][i] = f"NV{nv}" if nv else path
            read[i][j] = p2p_word(nvml, reader, i, j, "NVML_P2P_CAPS_INDEX_READ", 0)
            write[i][j] = p2p_word(nvml, reader, i, j, "NVML_P2P_CAPS_INDEX_WRITE", 1)
    return Topology(gpus=gpus, links=links, p2p_read=read, p2p_write=write, notes=reader.notes)


def path_word(nvml: Nvml, reader: Reader, i: int, j: int) -> str:
    handle = nvml.handle(j)
    level = nvml.query(i, "nvmlDeviceGetTopologyCommonAncestor", handle) if not isinstance(handle, NA) else handle
    if isinstance(reader.said("PCIe path between GPUs", level), NA):
        return UNKNOWN
    return reader.word(PATHS, level)


def p2p_word(nvml: Nvml, reader: Reader, i: int, j: int, capability: str, default: int) -> str:
    handle = nvml.handle(j)
    status = (nvml.query(i, "nvmlDeviceGetP2PStatus", handle, nvml.const(capability, default))
              if not isinstance(handle, NA) else handle)
    if isinstance(reader.said("P2P status", status), NA):
        return UNKNOWN
    return reader.word(P2P_WORDS, status)


def link_peak(topology: Topology, indices: list[int]) -> tuple[float | NA, str]:
    """The peak a collective across the GPUs `indices` (NVML's) can reach, GB/s each way per GPU, and where it comes
    from: their NVLinks where every pair of them is linked by NVLink (the fewest GPU's), else their PCIe links (the
    slowest), said with the path across NUMA nodes where there is one; NA with the reason when it cannot be said."""
    if topology.reason:
        return NA(f"the GPUs' links are unknown: {topology.reason}"), ""
    if any(i >= len(topology.gpus) for i in indices):
        return NA("a GPU of the run is not among those NVML sees"), ""
    gpus = [topology.gpus[i] for i in indices]
    pairs = [topology.links[i][j] for i in indices for j in indices if i < j]
    if pairs and all(word.startswith("NV") for word in pairs):
        peaks = [g.nvlink_gbs for g in gpus]
        missing = next((p for p in peaks if isinstance(p, NA)), None)
        if missing is not None:
            return NA(f"NVLink's peak is unknown: {missing.reason}"), ""
        slowest = min(range(len(gpus)), key=lambda k: peaks[k])
        return peaks[slowest], f"NVLink, {gpus[slowest].nvlinks} links of GPU{gpus[slowest].index}"
    peaks = [g.pcie_gbs for g in gpus]
    missing = next((p for p in peaks if isinstance(p, NA)), None)
    if missing is not None:
        return NA(f"the PCIe link's peak is unknown: {missing.reason}"), ""
    slowest = min(range(len(gpus)), key=lambda k: peaks[k])
    across = (", and between NUMA nodes the path crosses the CPUs' interconnect, which may be slower"
              if "SYS" in pairs else "")
    return peaks[slowest], f"PCIe {gpus[slowest].pcie} of GPU{gpus[slowest].index}{across}"
