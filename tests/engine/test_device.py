"""Device facts and peak figures, on fakes (any box) and on a real GPU (`gpu` marker)."""

from __future__ import annotations

import json

import pytest
import torch

from tests.fakes import fake_nvml as fk
from tests.fakes.fake_cuda import FakeCuda, FakeDeviceProperties, h100_fakes
from tests.fakes.fake_nvml import FakeGpu, FakeNvml, MiB
from torchperf_tui.engine.hardware.device import (
    DeviceReport,
    TorchCudaBackend,
    format_cudnn_version,
    nvml_index_for,
    probe_cpu,
    probe_device,
)
from torchperf_tui.engine.hardware.device_peaks import peak_figures
from torchperf_tui.engine.hardware.nvml import NA, Nvml

# The lead's conftest skips `gpu` tests without CUDA; the skipif keeps that true if run outside it.
needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


def _probe(nvml_fake, cuda_fake) -> DeviceReport:
    return probe_device(nvml=Nvml.open(nvml_fake), cuda=cuda_fake)


# -- peak formulas --------------------------------------------------------------------------------------------


def test_h100_sxm_peaks_match_hand_computed_values_and_datasheet():
    peaks = peak_figures("9.0", 132, 1980, 2619, 5120)
    assert peaks.fp32_tflops == pytest.approx(1980e6 * 132 * 128 * 2 / 1e12)  # 66.9 on the datasheet
    assert peaks.fp16_tensor_tflops == pytest.approx(1830e6 * 132 * 4096 / 1e12)  # 989.4
    assert peaks.bf16_tensor_tflops == peaks.fp16_tensor_tflops
    assert peaks.bandwidth_gbs == pytest.approx(2619e6 * 5120 / 8 * 2 / 1e9)  # 3352 GB/s = 3.35 TB/s
    assert round(peaks.fp32_tflops, 1) == 66.9
    assert round(peaks.bf16_tensor_tflops, 1) == 989.4
    assert peaks.formulas["fp32"] == "1980 MHz (max SM clock) x 132 SMs x 128 FP32 cores x 2 = 66.9 TFLOP/s"
    assert "1830 MHz" in peaks.formulas["bf16_tensor"] and "4096" in peaks.formulas["bf16_tensor"]
    assert peaks.formulas["bandwidth"].startswith("2619 MHz (max memory clock) x 5120 bits / 8 x 2")
    assert peaks.formulas["bandwidth"].endswith("= 3352.3 GB/s")


@pytest.mark.parametrize(
    ("mem_clock", "expected_gbs"),
    [(1215, 1555.2), (1593, 2039.0)],  # A100 40GB (1.55 TB/s) and A100 80GB (2.0 TB/s)
)
def test_a100_peaks_match_datasheet(mem_clock, expected_gbs):
    peaks = peak_figures((8, 0), 108, 1410, mem_clock, 5120)
    assert peaks.fp32_tflops == pytest.approx(1410e6 * 108 * 64 * 2 / 1e12)
    assert round(peaks.fp32_tflops, 1) == 19.5
    assert round(peaks.bf16_tensor_tflops) == 312  # 1410 MHz x 108 x 2048, no datasheet override
    assert peaks.bandwidth_gbs == pytest.approx(expected_gbs, abs=0.1)
    assert "1410 MHz (max SM clock)" in peaks.formulas["fp16_tensor"]


def test_h100_below_datasheet_tensor_clock_uses_its_own_clock():
    peaks = peak_figures("9.0", 132, 1500, 2619, 5120)  # a power-capped part: never above its own clock
    assert peaks.fp16_tensor_tflops == pytest.approx(1500e6 * 132 * 4096 / 1e12)


def test_volta_has_no_bf16_tensor_cores_and_geforce_runs_half_rate():
    volta = peak_figures("7.0", 80, 1530, 877, 4096)
    assert isinstance(volta.bf16_tensor_tflops, NA) and "no BF16" in volta.bf16_tensor_tflops.reason
    assert round(volta.fp16_tensor_tflops, 1) == 125.3
    geforce = peak_figures("8.6", 82, 1695, 9751, 384, name="NVIDIA GeForce RTX 3090")
    pro = peak_figures("8.6", 82, 1695, 9751, 384, name="NVIDIA RTX A6000")
    assert geforce.fp16_tensor_tflops == pytest.approx(pro.fp16_tensor_tflops / 2)
    assert "GeForce" in geforce.formulas["fp16_tensor"]
    assert geforce.bandwidth_gbs == pytest.approx(936.1, abs=0.1)  # the 3090's 936 GB/s


def test_unknown_architecture_is_na_with_reason_but_bandwidth_still_computed():
    peaks = peak_figures("12.1", 48, 2000, 4000, 256)
    assert peaks.fp32_tflops == NA("unknown cores/SM for sm_121")
    assert isinstance(peaks.bf16_tensor_tflops, NA)
    assert peaks.bandwidth_gbs == pytest.approx(4000e6 * 256 / 8 * 2 / 1e9)
    assert set(peaks.formulas) == {"bandwidth"}


def test_missing_inputs_carry_their_reason():
    gone = NA("not supported on this GPU")
    peaks = peak_figures("9.0", 132, gone, gone, 5120)
    assert peaks.fp32_tflops == gone and peaks.bandwidth_gbs == gone
    assert peaks.formulas == {}


def test_cudnn_version_text():
    assert format_cudnn_version(8902) == "8.9.2"
    assert format_cudnn_version(91300) == "9.13.0"
    assert isinstance(format_cudnn_version(None), NA)


# -- probe_device on fakes ------------------------------------------------------------------------------------


def test_probe_h100_fakes_reports_every_fact():
    report = _probe(*h100_fakes())
    assert report.cuda_available and report.cuda_reason is None
    assert report.nvml_available and report.nvml_reason is None
    assert (report.cuda_runtime, report.cudnn_version, report.driver_version) == ("13.0", "9.13.0", "580.159.04")
    (gpu,) = report.gpus
    assert gpu.name == "NVIDIA H100 80GB HBM3" and gpu.compute_capability == "9.0"
    assert (gpu.sm_count, gpu.total_memory_bytes, gpu.l2_cache_bytes) == (132, 81559 * MiB, 50 * MiB)
    assert (gpu.max_sm_clock_mhz, gpu.max_mem_clock_mhz, gpu.memory_bus_width_bits) == (1980, 2619, 5120)
    assert gpu.power_limit_w == 700.0
    assert round(gpu.peak_fp32_tflops, 1) == 66.9 and round(gpu.peak_bf16_tensor_tflops, 1) == 989.4
    assert round(gpu.peak_bandwidth_gbs) == 3352
    assert set(gpu.formulas) == {"fp32", "fp16_tensor", "bf16_tensor", "bandwidth"}
    assert gpu.architecture == "Hopper" and gpu.nvml_index == 0


def test_nvml_clock_not_supported_falls_back_to_torch_properties():
    nvml, cuda = h100_fakes()
    nvml.fail("nvmlDeviceGetMaxClockInfo", fk.NVML_ERROR_NOT_SUPPORTED)
    (gpu,) = _probe(nvml, cuda).gpus
    assert (gpu.max_sm_clock_mhz, gpu.max_mem_clock_mhz) == (1980, 2619)  # cudaDeviceProp kHz / 1000
    assert "from torch" in gpu.formulas["fp32"] and "from torch" in gpu.formulas["bandwidth"]
    assert gpu.power_limit_w == 700.0  # other NVML fields unaffected


def test_no_clock_anywhere_gives_na_peaks_with_reason():
    nvml, cuda = h100_fakes()
    nvml.fail("nvmlDeviceGetMaxClockInfo", fk.NVML_ERROR_NOT_SUPPORTED)
    cuda.devices[0] = FakeDeviceProperties(uuid=cuda.devices[0].uuid, clock_rate=None, memory_clock_rate=None)
    (gpu,) = _probe(nvml, cuda).gpus
    assert gpu.max_sm_clock_mhz == NA("not supported on this GPU")
    assert gpu.peak_fp32_tflops == NA("not supported on this GPU")
    assert gpu.peak_bandwidth_gbs == NA("not supported on this GPU")
    assert gpu.memory_bus_width_bits == 5120  # still from NVML
    assert gpu.sm_count == 132


@pytest.mark.parametrize("code", [fk.NVML_ERROR_LIB_RM_VERSION_MISMATCH, fk.NVML_ERROR_LIBRARY_NOT_FOUND])
def test_nvml_init_failure_keeps_torch_facts(code):
    nvml, cuda = h100_fakes()
    nvml.fail_init(code)
    report = _probe(nvml, cuda)
    assert report.nvml_available is False and report.nvml_reason.startswith("NVML init failed")
    assert report.cuda_available
    (gpu,) = report.gpus
    assert gpu.name == "NVIDIA H100 80GB HBM3" and gpu.sm_count == 132
    assert isinstance(gpu.power_limit_w, NA) and isinstance(gpu.nvml_index, NA)
    assert gpu.max_sm_clock_mhz == 1980 and "from torch" in gpu.formulas["fp32"]


def test_cuda_visible_devices_reorder_is_matched_by_uuid(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    nvml = FakeNvml(gpus=[FakeGpu(uuid="GPU-aaaa", power_limit_mw=400_000),
                          FakeGpu(uuid="GPU-bbbb", power_limit_mw=300_000)])
    cuda = FakeCuda([FakeDeviceProperties(uuid="bbbb")])
    opened = Nvml.open(nvml)
    assert nvml_index_for(opened, cuda, 0) == 1
    (gpu,) = probe_device(opened, cuda).gpus
    assert gpu.power_limit_w == 300.0


def test_no_cuda_no_nvml_reports_both_reasons():
    nvml = FakeNvml()
    nvml.fail_init(fk.NVML_ERROR_LIBRARY_NOT_FOUND)
    report = _probe(nvml, FakeCuda.unavailable("this torch build has no CUDA support"))
    assert report.cuda_available is False and report.cuda_reason == "this torch build has no CUDA support"
    assert report.nvml_available is False and "not found" in report.nvml_reason
    assert report.gpus == []
    assert isinstance(report.cuda_runtime, NA) and isinstance(report.cudnn_version, NA)
    assert report.cpu.logical_cores > 0


def test_gpu_seen_by_nvml_but_not_torch_is_listed_with_reasons():
    report = _probe(FakeNvml(), FakeCuda.unavailable("this torch build has no CUDA support"))
    (gpu,) = report.gpus
    assert gpu.name == "NVIDIA H100 80GB HBM3" and gpu.compute_capability == "9.0"
    assert gpu.total_memory_bytes == 81559 * MiB
    assert isinstance(gpu.sm_count, NA) and "torch cannot use it" in gpu.sm_count.reason
    assert isinstance(gpu.peak_fp32_tflops, NA)
    assert round(gpu.peak_bandwidth_gbs) == 3352  # needs no SM count


def test_report_to_dict_is_json_with_na_as_text():
    nvml, cuda = h100_fakes()
    nvml.fail("nvmlDeviceGetEnforcedPowerLimit", fk.NVML_ERROR_NO_PERMISSION)
    data = _probe(nvml, cuda).to_dict()
    text = json.dumps(data)
    assert data["gpus"][0]["power_limit_w"] == "n/a (no permission to read this)"
    assert data["gpus"][0]["formulas"]["fp32"].endswith("66.9 TFLOP/s")
    assert json.loads(text)["cpu"]["logical_cores"] > 0


# -- the real box ---------------------------------------------------------------------------------------------


def test_cpu_facts_are_real():
    cpu = probe_cpu()
    assert isinstance(cpu.model, str) and cpu.model
    assert cpu.logical_cores > 0
    assert isinstance(cpu.physical_cores, NA) or 0 < cpu.physical_cores <= cpu.logical_cores
    assert cpu.ram_total_bytes > 256 * MiB
    assert cpu.torch_threads == torch.get_num_threads() >= 1
    assert cpu.mkldnn_available == torch.backends.mkldnn.is_available()
    assert isinstance(cpu.freq_mhz, NA) or cpu.freq_mhz > 0


def test_probe_real_box_never_raises_and_agrees_with_torch():
    report = probe_device()
    assert report.torch_version == torch.__version__
    assert report.cuda_available == torch.cuda.is_available()
    if not report.cuda_available:
        assert report.cuda_reason
    if not report.nvml_available:
        assert report.nvml_reason
    json.dumps(report.to_dict())


def test_torch_backend_gives_a_reason_when_cuda_is_missing():
    backend = TorchCudaBackend()
    assert backend.is_available() == torch.cuda.is_available()
    assert (backend.unavailable_reason() is None) == backend.is_available()


@pytest.mark.gpu
@needs_cuda
def test_gpu_probe_agrees_with_torch_cuda():
    report = probe_device()
    props = torch.cuda.get_device_properties(0)
    gpu = report.gpus[0]
    assert len(report.gpus) == torch.cuda.device_count()
    assert gpu.name == props.name
    assert gpu.compute_capability == f"{props.major}.{props.minor}"
    assert gpu.sm_count == props.multi_processor_count
    assert gpu.total_memory_bytes == props.total_memory
    assert report.cuda_runtime == torch.version.cuda
    assert report.nvml_available, report.nvml_reason
    assert isinstance(report.driver_version, str)
    assert gpu.max_sm_clock_mhz > 0 and gpu.max_mem_clock_mhz > 0 and gpu.memory_bus_width_bits > 0
    assert gpu.power_limit_w > 0
    if (props.major, props.minor) == (9, 0):  # the H100/H200 the GPU tests are run on
        assert 50 < gpu.peak_fp32_tflops < 80
        assert 700 < gpu.peak_bf16_tensor_tflops < 1100
        assert 2000 < gpu.peak_bandwidth_gbs < 5000
