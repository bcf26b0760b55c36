"""How the GPUs are linked (engine.hardware.topology.Topology) in words: the matrix of links and the one of P2P
support as `nvidia-smi topo -m` lays them out (a row per GPU with its NUMA node and CPU affinity), their legends and
each GPU's link peaks; `info` and the Device tab say it through these."""

from __future__ import annotations

from torchperf_tui.core.formatting import gbs_text
from torchperf_tui.engine.hardware.nvml import NA

LINK_LEGEND = ("X itself · NV# # NVLinks between them · PIX at most one PCIe switch · PXB several PCIe switches, no "
               "host bridge · PHB a PCIe host bridge (a CPU) · NODE between host bridges of one NUMA node · SYS "
               "across NUMA nodes (the CPUs' interconnect) · BRD on one board")
P2P_LEGEND = ("can the row's GPU read/write the column's memory directly: OK · CNS the chipset does not support "
              "it · GNS the GPU does not · TNS the topology does not · DRK disabled by a registry key · NS not "
              "supported · U unknown; READ/WRITE where the two differ")
LINKS_TITLE = "GPU links"
P2P_TITLE = "GPU P2P read/write"
NUMBERING = "GPUs numbered as NVML numbers them (PCI order; CUDA_VISIBLE_DEVICES renumbers torch's)"


def shown(topology) -> bool:
    """A matrix is worth showing across two GPUs or more."""
    return topology is not None and not topology.reason and len(topology.gpus) >= 2


def value_text(value) -> str:
    return "n/a" if isinstance(value, NA) else str(value)


def link_header(topology) -> list[str]:
    return ["", *(f"GPU{g.index}" for g in topology.gpus), "NUMA", "CPU affinity"]


def link_cells(topology) -> list[list[str]]:
    """A row per GPU: its link to each GPU, its NUMA node and the CPUs close to it."""
    return [[f"GPU{g.index}", *topology.links[row], value_text(g.numa_node), value_text(g.cpu_affinity)]
            for row, g in enumerate(topology.gpus)]


def p2p_header(topology) -> list[str]:
    return ["", *(f"GPU{g.index}" for g in topology.gpus)]


def p2p_cell(read: str, write: str) -> str:
    """'OK' where reads and writes agree, else 'OK/GNS' (read/write)."""
    return read if read == write else f"{read}/{write}"


def p2p_cells(topology) -> list[list[str]]:
    """A row per GPU: whether it can read and write each other GPU's memory."""
    return [[f"GPU{g.index}", *(p2p_cell(r, w) for r, w in zip(topology.p2p_read[row], topology.p2p_write[row]))]
            for row, g in enumerate(topology.gpus)]


PEAKS_HEADING = "Link peaks, each way per GPU:"


def peak_text(gbs, what) -> str:
    return f"{what} {gbs_text(gbs)}" if isinstance(gbs, float) else f"{what}: {value_text(gbs)}"


def gpu_link_lines(topology) -> list[str]:
    """A line per GPU, under PEAKS_HEADING: 'GPU0 (00000000:18:00.0): NVLink 12 links 300.0 GB/s · PCIe Gen4 x16
    31.5 GB/s'."""
    lines = []
    for g in topology.gpus:
        nvlink = "no NVLink" if g.nvlinks == 0 else peak_text(g.nvlink_gbs, f"NVLink {value_text(g.nvlinks)} links")
        lines.append(f"GPU{g.index} ({value_text(g.bus_id)}): {nvlink} · "
                     f"{peak_text(g.pcie_gbs, f'PCIe {value_text(g.pcie)}')}")
    return lines
