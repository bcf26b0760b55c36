"""`info` on an eight-GPU box (the fake NVML's): the links matrix as `nvidia-smi topo -m` lays it out, the P2P one,
each GPU's link peaks, and all of it in --json."""

from __future__ import annotations

import json

import pytest

from tests.cli_run import run
from tests.engine.test_topology import EIGHT_GPU_LINKS, matrix
from tests.fakes.fake_nvml import eight_gpu_box
from torchperf_tui.engine.hardware.nvml import Nvml


@pytest.fixture
def eight_gpus(monkeypatch):
    nvml = Nvml.open(module=eight_gpu_box())
    monkeypatch.setattr("torchperf_tui.engine.hardware.device.default_nvml", lambda: nvml)


def test_info_shows_how_the_eight_gpus_are_linked(capsys, eight_gpus):
    code, out, err = run(capsys, "info")
    assert code == 0, err
    lines = out.splitlines()
    header = lines.index("GPU links") + 1
    assert lines[header].split() == [f"GPU{k}" for k in range(8)] + ["NUMA", "CPU", "affinity"]
    rows = [line.split() for line in lines[header + 1:header + 9]]
    assert [row[1:9] for row in rows] == matrix(EIGHT_GPU_LINKS)
    assert [row[9:] for row in rows] == [["0", "0-31,64-95"]] * 4 + [["1", "32-63,96-127"]] * 4
    p2p = lines.index("GPU P2P read/write") + 2
    assert lines[p2p + 7].split() == ["GPU7", "CNS", "CNS", "CNS", "CNS", "OK", "OK", "OK/GNS", "X"]
    assert "GPU5 (00000000:AB:00.0): NVLink 12 links 300.0 GB/s · PCIe Gen4 x16 31.5 GB/s" in out
    assert "SYS across NUMA nodes" in " ".join(out.split())


def test_info_json_carries_the_matrix(capsys, eight_gpus):
    code, out, _ = run(capsys, "info", "--json")
    topology = json.loads(out)["topology"]
    assert code == 0 and topology["links"] == matrix(EIGHT_GPU_LINKS)
    assert topology["p2p_write"][6][7] == "GNS" and topology["p2p_read"][6][7] == "OK"
    assert [g["numa_node"] for g in topology["gpus"]] == [0] * 4 + [1] * 4
