"""How the GPUs are linked (engine/hardware/topology.py), read through the fake NVML of an 8-GPU box: the matrix as
`nvidia-smi topo -m` shows it, P2P reads and writes, NUMA nodes and CPU affinity, each GPU's link peaks, the peak a
collective is held against, and a query NVML cannot answer said as '?' with its reason once."""

from __future__ import annotations

import json

import pytest

from tests.fakes.fake_cuda import FakeCuda
from tests.fakes.fake_nvml import (NVML_ERROR_LIBRARY_NOT_FOUND, NVML_ERROR_NO_PERMISSION, NVML_ERROR_NOT_SUPPORTED,
                                   FakeGpu, FakeNvml, eight_gpu_box, switch_box)
from torchperf_tui.engine.hardware.device import probe_device
from torchperf_tui.engine.hardware.device_peaks import pcie_gbs
from torchperf_tui.engine.hardware.nvml import NA, Nvml
from torchperf_tui.engine.hardware.topology import cpu_ranges, link_peak, probe_topology

# The fake box as nvidia-smi topo -m would show it (tests/fakes/fake_nvml.py eight_gpu_box).
EIGHT_GPU_LINKS = """
X    NV12 PXB  PXB  SYS  SYS  SYS  SYS
NV12 X    PXB  PXB  SYS  SYS  SYS  SYS
PXB  PXB  X    NV12 SYS  SYS  SYS  SYS
PXB  PXB  NV12 X    SYS  SYS  SYS  SYS
SYS  SYS  SYS  SYS  X    NV12 NODE NODE
SYS  SYS  SYS  SYS  NV12 X    NODE NODE
SYS  SYS  SYS  SYS  NODE NODE X    NV12
SYS  SYS  SYS  SYS  NODE NODE NV12 X
"""


def matrix(text: str) -> list[list[str]]:
    return [line.split() for line in text.strip().splitlines()]


def topology_of(fake) -> object:
    return probe_topology(Nvml.open(module=fake))


def test_the_eight_gpu_box_reads_as_nvidia_smi_shows_it():
    topology = topology_of(eight_gpu_box())
    assert topology.links == matrix(EIGHT_GPU_LINKS)
    assert [g.numa_node for g in topology.gpus] == [0, 0, 0, 0, 1, 1, 1, 1]
    assert {g.cpu_affinity for g in topology.gpus[:4]} == {"0-31,64-95"}
    assert {g.cpu_affinity for g in topology.gpus[4:]} == {"32-63,96-127"}
    assert topology.gpus[5].bus_id == "00000000:AB:00.0"
    assert topology.notes == [] and topology.reason is None


def test_p2p_reads_and_writes_are_read_per_direction():
    topology = topology_of(eight_gpu_box())
    same_node = [(i, j) for i in range(8) for j in range(8) if i != j and i // 4 == j // 4]
    assert all(topology.p2p_read[i][j] == "OK" for i, j in same_node)
    assert all(topology.p2p_read[i][j] == topology.p2p_write[i][j] == "CNS"
               for i in range(4) for j in range(4, 8))  # the chipset between the NUMA nodes
    assert (topology.p2p_read[6][7], topology.p2p_write[6][7]) == ("OK", "GNS")
    assert [topology.p2p_read[k][k] for k in range(8)] == ["X"] * 8


def test_each_gpus_link_peaks_are_its_links_at_their_datasheet_rate():
    gpu = topology_of(eight_gpu_box()).gpus[0]
    assert (gpu.nvlinks, gpu.nvlink_gbs) == (12, 12 * 25.0)  # A100: NVLink 3, 25 GB/s each way a link
    assert gpu.pcie == "Gen4 x16" and gpu.pcie_gbs == 16 * (128 / 130) * 16 / 8
    assert pcie_gbs(2, 8) == 5.0 * 0.8 * 8 / 8 and isinstance(pcie_gbs(9, 16), NA)


def test_a_collective_is_held_against_nvlink_only_where_every_pair_has_it():
    topology = topology_of(eight_gpu_box())
    assert link_peak(topology, [0, 1]) == (300.0, "NVLink, 12 links of GPU0")
    peak, source = link_peak(topology, [0, 1, 2, 3])
    assert peak == topology.gpus[0].pcie_gbs and source == "PCIe Gen4 x16 of GPU0"
    peak, source = link_peak(topology, list(range(8)))
    assert "between NUMA nodes the path crosses the CPUs' interconnect" in source


def test_nvswitch_links_reach_every_gpu():
    topology = topology_of(switch_box())
    assert all(cell == "NV18" for k, row in enumerate(topology.links) for j, cell in enumerate(row) if j != k)
    assert link_peak(topology, list(range(8))) == (18 * 25.0, "NVLink, 18 links of GPU0")


def test_a_gpu_without_nvlink_or_numa_node_says_so():
    fake = FakeNvml(gpus=[FakeGpu(pci_bus_id="00000000:01:00.0", numa_node=None, cpus=(0, 1)),
                          FakeGpu(pci_bus_id="00000000:02:00.0", numa_node=None, cpus=(0, 1))])
    fake.paths[frozenset((0, 1))] = 30  # PHB
    topology = topology_of(fake)
    assert topology.links == [["X", "PHB"], ["PHB", "X"]]
    assert topology.gpus[0].nvlinks == 0 and isinstance(topology.gpus[0].nvlink_gbs, NA)
    assert isinstance(topology.gpus[0].numa_node, NA)
    assert topology.notes == ["NUMA node: not supported on this GPU"]  # said once for both GPUs


def test_a_query_nvml_cannot_answer_is_a_question_mark_with_its_reason_once():
    fake = eight_gpu_box()
    fake.fail("nvmlDeviceGetTopologyCommonAncestor", NVML_ERROR_NOT_SUPPORTED)
    fake.fail("nvmlDeviceGetP2PStatus", NVML_ERROR_NO_PERMISSION)
    topology = topology_of(fake)
    assert topology.links[0][1] == "NV12" and topology.links[0][2] == "?"  # NVLink needs no path query
    assert topology.p2p_read[0][1] == topology.p2p_write[4][0] == "?"
    assert topology.notes == ["PCIe path between GPUs: not supported on this GPU",
                              "P2P status: no permission to read this"]


def test_without_nvml_there_is_no_matrix_and_no_peak():
    fake = FakeNvml()
    fake.fail_init(NVML_ERROR_LIBRARY_NOT_FOUND)
    topology = topology_of(fake)
    assert topology.links == [] and "not found" in topology.reason
    peak, _ = link_peak(topology, [0, 1])
    assert isinstance(peak, NA) and "the GPUs' links are unknown" in peak.reason


def test_cpu_masks_read_as_ranges():
    assert cpu_ranges([0b1011, 0, 1]) == "0-1,3,128"
    assert cpu_ranges([0]) == ""


def test_the_device_report_carries_the_matrix_into_its_json():
    report = probe_device(nvml=Nvml.open(module=eight_gpu_box()), cuda=FakeCuda.unavailable())
    data = json.loads(json.dumps(report.to_dict()))
    assert data["topology"]["links"] == matrix(EIGHT_GPU_LINKS)
    assert data["topology"]["gpus"][7]["nvlink_gbs"] == 300.0


@pytest.mark.gpu
def test_this_boxs_topology_reads_without_a_question_mark_in_its_matrix():
    from torchperf_tui.engine.hardware.nvml import default_nvml

    topology = probe_topology(default_nvml())
    assert topology.reason is None and all("?" not in row for row in topology.links)


def test_every_nvml_call_it_makes_is_nvidia_ml_pys_and_the_fakes():
    import re
    from pathlib import Path

    import pynvml

    from torchperf_tui.engine.hardware import topology

    called = set(re.findall(r'"(nvml\w+)"', Path(topology.__file__).read_text()))
    assert {"nvmlDeviceGetTopologyCommonAncestor", "nvmlDeviceGetP2PStatus", "nvmlDeviceGetNvLinkState"} <= called
    assert [name for name in sorted(called) if not hasattr(pynvml, name) or not hasattr(FakeNvml, name)] == []
