"""The environment fingerprint: the device the run used, flat and JSON-able, probed once per process."""

from __future__ import annotations

import json

from torchperf_tui.engine.hardware.device import CpuFacts, DeviceReport, GpuFacts
from torchperf_tui.engine.records.fingerprint import clear_fingerprint_cache, environment_fingerprint
from torchperf_tui.engine.hardware.nvml import NA


def _report(gpu_names: list[str], cuda: bool = True) -> DeviceReport:
    na = NA("not probed in this test")
    gpus = [GpuFacts(i, name, "9.0", 132, na, na, na, na, na, na, na, na, na, na, {}) for i, name in
            enumerate(gpu_names)]
    cpu = CpuFacts("Test CPU 9000", 8, 16, na, na, 4, True)
    return DeviceReport(torch_version="2.14.1", cuda_available=cuda, cuda_reason=None, cuda_runtime="12.8",
                        cudnn_version=NA("cuDNN not available"), driver_version="550.54.15",
                        nvml_available=True, nvml_reason=None, gpus=gpus, cpu=cpu)


def test_fingerprint_names_the_device_the_run_used():
    report = _report(["GPU zero", "GPU one"])
    assert environment_fingerprint(report, device="cuda:1")["device_name"] == "GPU one"
    assert environment_fingerprint(report, device="cuda")["device_name"] == "GPU zero"
    assert environment_fingerprint(report)["device_name"] == "GPU zero"
    cpu = environment_fingerprint(report, device="cpu")
    assert cpu["device_name"] == "Test CPU 9000" and cpu["compute_capability"] is None
    assert cpu["driver"] == "550.54.15" and cpu["torch"] == "2.14.1" and cpu["cuda_runtime"] == "12.8"
    assert cpu["cudnn"] == "n/a (cuDNN not available)"
    for key in ("hostname", "python", "cpu", "torchvision", "gpu_count"):
        assert key in cpu
    json.dumps(cpu)  # flat and JSON-able


def test_fingerprint_probes_the_device_once(monkeypatch):
    from torchperf_tui.engine.records import fingerprint

    calls = []
    monkeypatch.setattr(fingerprint, "probe_device", lambda: calls.append(1) or _report([], cuda=False))
    clear_fingerprint_cache()
    try:
        assert environment_fingerprint()["device_name"] == "Test CPU 9000"
        environment_fingerprint(device="cpu")
        assert len(calls) == 1
    finally:
        clear_fingerprint_cache()
