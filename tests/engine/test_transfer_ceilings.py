"""The host-device transfers among the measured ceilings: on a GPU, host-to-device and device-to-host from pinned and
from pageable memory, each its bytes over the median of its timed copies, kept beside the compute and copy ceilings
in a list of their own; on a CPU none, and `ceilings` says why once. A file kept before them still reads, and a GPU's
is measured again; a transfer kept that is not one is a corrupt entry."""

from __future__ import annotations

import json

import pytest
import torch

from tests.test_cli import run
from torchperf_tui.app.widgets.device.device_pane import ceilings_text
from torchperf_tui.engine.hardware.ceilings import (NO_TRANSFERS_KEPT, NO_TRANSFERS_ON_CPU, TRANSFER_NAMES, Ceiling,
                                                    CeilingsFileError, CeilingsResult, device_key, load_ceilings,
                                                    save_ceilings)
from torchperf_tui.engine.measurements import ceiling_measurement
from torchperf_tui.engine.measurements.ceiling_measurement import (TRANSFER_BYTES, ceilings, measure_ceilings,
                                                                   transfer_ceilings)
from torchperf_tui.wording.ceilings import ceiling_cells, kept_ceilings_text

SMALL = dict(matmul_sizes=(32,), matmul_n=32, convs=(), copy_bytes=2**20, int8_n=32, reps=3, warmup=1, threads=(1,))
GPU_KEY = "NVIDIA H200 | torch 2.14 | cuda 13.0"
GB = 1e9


def _compute_and_copy() -> list[dict]:
    return [{"kind": "compute", "dtype": "float32", "value": 5e13, "size": "8192x8192x8192", "median_s": 0.02,
             "reps": 10, "workload": "matmul"},
            {"kind": "copy", "dtype": "float32", "value": 4e12, "size": "2.0 GiB", "median_s": 0.001, "reps": 10,
             "workload": "copy"}]


def _transfer(name: str, gbs: float) -> dict:
    seconds = 2**28 / (gbs * GB)
    return {"kind": "transfer", "dtype": "uint8", "value": gbs * GB, "size": "256.0 MiB", "median_s": seconds,
            "reps": 7, "workload": name, "threads": None,
            "tried": [{"workload": name, "size": "256.0 MiB", "threads": None, "value": gbs * GB,
                       "median_s": seconds, "reps": 7}]}


def gpu_entry(fmt: int = 3, transfers: list[dict] | None = None) -> dict:
    """A GPU's entry as this version keeps it (format 3, transfers beside the ceilings), or as version 2 did."""
    entry = {"device": "cuda:0", "key": GPU_KEY, "measured_at": 1.0, "format": fmt, "seconds": 9.0,
             "ceilings": _compute_and_copy()}
    if transfers is not None:
        entry["transfers"] = transfers
    return entry


H200_TRANSFERS = [_transfer("h2d pinned", 55.0), _transfer("h2d pageable", 20.0), _transfer("d2h pinned", 54.0),
                  _transfer("d2h pageable", 18.5)]


def test_on_the_cpu_no_transfer_is_measured_and_ceilings_says_why_once(ceilings_file_path, capsys):
    result = measure_ceilings("cpu", **SMALL)
    assert result.transfers == [] and result.no_transfers == NO_TRANSFERS_ON_CPU
    assert result.transfer("h2d", "pinned") is None and not result.stale  # a CPU's entry is complete without them
    save_ceilings(result)
    code, out, _ = run(capsys, "ceilings", "--device", "cpu")
    assert code == 0 and "kept from before" in out  # read back, not measured again
    assert out.count("no host-device transfers on a CPU") == 1 and "host-to-device" not in out
    code, out, _ = run(capsys, "ceilings", "--device", "cpu", "--json")
    data = json.loads(out)
    assert data["transfers"] == [] and data["no_transfers"] == NO_TRANSFERS_ON_CPU and data["format"] == 3


def test_a_transfer_ceiling_is_the_bytes_moved_over_the_median_of_its_timed_copies():
    rates = {"h2d pinned": 50e9, "h2d pageable": 12.5e9, "d2h pinned": 40e9, "d2h pageable": 10e9}
    timed, said = [], []

    def fake(workload):
        timed.append((workload.kind, workload.name, workload.size, workload.amount))
        return workload.amount / rates[workload.name], 6

    found = transfer_ceilings(fake, nbytes=3 * 2**20, said=said.append)
    assert timed == [("transfer", name, "3.0 MiB", 3 * 2**20) for name in TRANSFER_NAMES]  # moved once, not twice
    assert said == [f"{name} 3.0 MiB" for name in TRANSFER_NAMES]
    assert [(c.kind, c.dtype, c.workload, c.reps) for c in found] == [("transfer", "uint8", n, 6)
                                                                      for n in TRANSFER_NAMES]
    for ceiling in found:
        assert ceiling.value == pytest.approx(rates[ceiling.workload])
        assert ceiling.median_s == pytest.approx(3 * 2**20 / rates[ceiling.workload])
        assert [t.value for t in ceiling.tried] == [ceiling.value] and ceiling.threads is None
    assert found[0].text == "50.0 GB/s" and TRANSFER_BYTES == 256 * 2**20


def test_a_gpus_transfers_kept_by_hand_round_trip_through_the_file(ceilings_file_path):
    ceilings_file_path.write_text(json.dumps({"devices": {GPU_KEY: gpu_entry(transfers=H200_TRANSFERS)}}))
    kept = load_ceilings(GPU_KEY)
    assert [c.workload for c in kept.transfers] == list(TRANSFER_NAMES)
    assert kept.transfer("h2d", "pinned").value == 55e9 and kept.transfer("d2h", "pageable").value == 18.5e9
    assert kept.no_transfers is None and not kept.stale and kept.outdated is None
    assert kept.compute("float32").value == 5e13 and kept.copy().value == 4e12  # the ceilings beside them unchanged
    ceilings_file_path.write_text("")
    save_ceilings(kept)
    again = load_ceilings(GPU_KEY)
    assert again.transfers == kept.transfers and again.format == 3
    written = json.loads(ceilings_file_path.read_text())["devices"][GPU_KEY]
    assert [t["workload"] for t in written["transfers"]] == list(TRANSFER_NAMES)
    assert all(c["kind"] != "transfer" for c in written["ceilings"])  # apart: an earlier version reads the rest


def test_a_gpus_file_kept_before_the_transfers_still_reads_says_so_and_is_measured_again(ceilings_file_path,
                                                                                            monkeypatch):
    ceilings_file_path.write_text(json.dumps({"devices": {GPU_KEY: gpu_entry(fmt=2)}}))
    kept = load_ceilings(GPU_KEY)
    assert kept.transfers == [] and kept.compute("float32").value == 5e13
    assert kept.outdated is None  # its compute and copy ceilings are this version's: the roofline's are not outdated
    assert kept.no_transfers == NO_TRANSFERS_KEPT and "--refresh" in NO_TRANSFERS_KEPT and kept.stale
    assert "no host-device transfers: kept by an earlier torchperf-tui" in ceilings_text(kept, "cuda:0")

    measured = []

    def fake_measure(device, **options):
        measured.append(device)
        return CeilingsResult(device="cuda:0", key=GPU_KEY, measured_at=2.0,
                              ceilings=load_ceilings(GPU_KEY).ceilings,
                              transfers=[Ceiling.from_dict(t) for t in H200_TRANSFERS])

    monkeypatch.setattr(ceiling_measurement, "device_key", lambda device: GPU_KEY)
    monkeypatch.setattr(ceiling_measurement, "measure_ceilings", fake_measure)
    fresh = ceilings("cpu")  # not asked to refresh: a GPU's entry without its transfers is measured again
    assert measured == ["cpu"] and not fresh.cached and load_ceilings(GPU_KEY).transfer("h2d", "pinned") is not None
    again = ceilings("cpu")  # now complete: read back
    assert measured == ["cpu"] and again.cached


def test_a_cpus_entry_of_the_previous_format_is_neither_stale_nor_missing_anything(ceilings_file_path):
    key = device_key(torch.device("cpu"))
    entry = {**gpu_entry(fmt=2), "device": "cpu", "key": key}
    ceilings_file_path.write_text(json.dumps({"devices": {key: entry}}))
    kept = ceilings("cpu", **SMALL)
    assert kept.cached and kept.format == 2 and kept.no_transfers == NO_TRANSFERS_ON_CPU and not kept.stale


@pytest.mark.parametrize("transfer, wrong", [
    ({**_transfer("h2d pinned", 55.0), "kind": "copy"}, "a transfer is copy 'h2d pinned'"),
    ({**_transfer("h2d pinned", 55.0), "workload": "h2d mapped"}, "a transfer is transfer 'h2d mapped'"),
    ({**_transfer("h2d pinned", 55.0), "value": float("nan")}, "value is not a finite number: nan"),
])
def test_a_kept_transfer_that_is_not_one_makes_the_entry_corrupt(ceilings_file_path, transfer, wrong):
    ceilings_file_path.write_text(json.dumps({"devices": {GPU_KEY: gpu_entry(transfers=[transfer])}}))
    with pytest.raises(CeilingsFileError, match="corrupt") as caught:
        load_ceilings(GPU_KEY)
    assert wrong in str(caught.value)


def test_the_transfers_are_said_in_the_ceilings_table_infos_line_and_the_device_tab(ceilings_file_path):
    ceilings_file_path.write_text(json.dumps({"devices": {GPU_KEY: gpu_entry(transfers=H200_TRANSFERS)}}))
    kept = load_ceilings(GPU_KEY)
    cells = ceiling_cells(kept)
    assert cells[2:] == [("host-to-device, pinned", "uint8", "h2d pinned", "256.0 MiB", "–", "4.88 ms", "55.0 GB/s"),
                         ("host-to-device, pageable", "uint8", "h2d pageable", "256.0 MiB", "–", "13.42 ms",
                          "20.0 GB/s"),
                         ("device-to-host, pinned", "uint8", "d2h pinned", "256.0 MiB", "–", "4.97 ms", "54.0 GB/s"),
                         ("device-to-host, pageable", "uint8", "d2h pageable", "256.0 MiB", "–", "14.51 ms",
                          "18.5 GB/s")]
    assert ("· host-to-device 55.0 GB/s pinned, 20.0 GB/s pageable · device-to-host 54.0 GB/s pinned, "
            "18.5 GB/s pageable (measured") in kept_ceilings_text(kept)
    pane = ceilings_text(kept, "cuda:0")
    assert "  host-to-device, pinned: 55.0 GB/s, 256.0 MiB" in pane and "device-to-host, pageable: 18.5 GB/s" in pane
    assert "no host-device transfers" not in pane


def test_the_device_tab_says_once_why_a_cpu_has_no_transfers_and_offers_them_on_a_gpu_only():
    cpu = CeilingsResult(device="cpu", key="cpu | t", measured_at=1.0)
    pane = ceilings_text(cpu, "cpu")
    assert pane.count(NO_TRANSFERS_ON_CPU) == 1 and "host-to-device," not in pane
    assert "host-device transfers" in ceilings_text(None, "cuda:0")  # what C measures, on the device it measures
    assert "host-device transfers" not in ceilings_text(None, "cpu")


@pytest.fixture
def ceilings_file_path(tmp_path, monkeypatch):
    path = tmp_path / "kept-ceilings.json"
    monkeypatch.setenv("TORCHPERF_CEILINGS", str(path))
    return path


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device (none on this machine)")
def test_a_gpus_transfers_are_measured_pinned_at_least_near_pageable_and_below_any_bus(ceilings_file_path):
    result = measure_ceilings("cuda", matmul_sizes=(1024,), matmul_n=1024, convs=(), copy_bytes=2**26, int8_n=1024,
                              reps=5)
    assert [c.workload for c in result.transfers] == list(TRANSFER_NAMES) and result.no_transfers is None
    for ceiling in result.transfers:  # a PCIe or NVLink-C2C link: between a tenth of a GB/s and a TB/s
        assert 0.1 * GB < ceiling.value < 1000 * GB, (ceiling.workload, ceiling.text)
        assert ceiling.size == "256.0 MiB" and ceiling.reps >= 3
    assert result.transfer("h2d", "pinned").value >= 0.5 * result.transfer("h2d", "pageable").value
    assert result.transfer("d2h", "pinned").value >= 0.5 * result.transfer("d2h", "pageable").value
    save_ceilings(result)
    assert load_ceilings(result.key).transfers == result.transfers
