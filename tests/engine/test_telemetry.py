"""Telemetry sampling, the ring buffer, and release_memory, on fakes and (with `gpu`) on a real GPU."""

from __future__ import annotations

import time

import pytest
import torch

from tests.fakes import fake_nvml as fk
from tests.fakes.fake_cuda import FakeCuda, h100_fakes
from tests.fakes.fake_nvml import FakeGpu, FakeNvml, GiB, MiB
from torchperf_tui.core.errors import DeviceError
from torchperf_tui.engine.hardware.nvml import NA, Nvml
from torchperf_tui.engine.hardware.telemetry import (
    GpuSample,
    ReleaseReport,
    TelemetrySampler,
    release_memory,
)
from torchperf_tui.core.formatting import format_bytes

needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")

GPU_FIELDS = ("mem_used_bytes", "mem_total_bytes", "mem_free_bytes", "util_gpu_pct", "util_mem_pct",
              "temperature_c", "power_w", "sm_clock_mhz")


def _h100_sampler(capacity: int = 600):
    nvml, cuda = h100_fakes()
    return nvml, cuda, TelemetrySampler(nvml=Nvml.open(nvml), cuda=cuda, capacity=capacity)


def test_sample_reads_every_field_in_engine_units():
    nvml, cuda, sampler = _h100_sampler()
    nvml.gpus[0].util_gpu, nvml.gpus[0].util_mem, nvml.gpus[0].power_mw = 97, 64, 612_500
    before = time.time()
    s = sampler.sample()
    assert before <= s.timestamp <= time.time()
    (gpu,) = s.gpus
    used = nvml.gpus[0].memory_used
    assert (gpu.mem_used_bytes, gpu.mem_total_bytes, gpu.mem_free_bytes) == (used, 81559 * MiB, 81559 * MiB - used)
    assert (gpu.util_gpu_pct, gpu.util_mem_pct, gpu.temperature_c, gpu.sm_clock_mhz) == (97, 64, 31, 345)
    assert gpu.power_w == 612.5  # NVML gives milliwatts
    assert (s.torch_allocated_bytes, s.torch_reserved_bytes, s.torch_peak_bytes) == (1 * GiB, 3 * GiB, 3 * GiB)
    assert s.process_rss_bytes > 0
    assert 0 < s.system_ram_used_bytes <= s.system_ram_total_bytes


def test_memory_change_shows_in_the_next_sample():
    nvml, cuda, sampler = _h100_sampler()
    first = sampler.sample()
    cuda.allocate(0, 5 * GiB)  # grows reserved and, through the linked fake, NVML's used memory
    second = sampler.sample()
    assert second.gpus[0].mem_used_bytes - first.gpus[0].mem_used_bytes == 3 * GiB  # 2 GiB came from cache
    assert second.torch_allocated_bytes - first.torch_allocated_bytes == 5 * GiB
    assert second.torch_peak_bytes == 6 * GiB


@pytest.mark.parametrize(
    ("function", "fields"),
    [
        ("nvmlDeviceGetPowerUsage", ("power_w",)),
        ("nvmlDeviceGetTemperature", ("temperature_c",)),
        ("nvmlDeviceGetClockInfo", ("sm_clock_mhz",)),
        ("nvmlDeviceGetUtilizationRates", ("util_gpu_pct", "util_mem_pct")),
        ("nvmlDeviceGetMemoryInfo", ("mem_used_bytes", "mem_total_bytes", "mem_free_bytes")),
    ],
)
@pytest.mark.parametrize(("code", "words"), fk.QUERY_ERRORS)
def test_each_nvml_error_degrades_only_its_field_and_sampling_goes_on(function, fields, code, words):
    nvml, _, sampler = _h100_sampler()
    nvml.fail(function, code)
    for _ in range(3):
        gpu = sampler.sample().gpus[0]
        for name in GPU_FIELDS:
            value = getattr(gpu, name)
            if name in fields:
                assert isinstance(value, NA) and words in value.reason, name
            else:
                assert isinstance(value, (int, float)), name
    nvml.clear_failures()
    recovered = sampler.sample().gpus[0]
    assert all(isinstance(getattr(recovered, n), (int, float)) for n in GPU_FIELDS)
    assert len(sampler.history) == 4


def test_lost_gpu_among_two_degrades_that_gpu_only():
    nvml = FakeNvml(gpus=[FakeGpu(), FakeGpu(name="second")])
    sampler = TelemetrySampler(nvml=Nvml.open(nvml), cuda=FakeCuda.unavailable())
    sampler.sample()  # handles are cached by now, as in a long-running session

    nvml.lose(1)
    first, second = sampler.sample().gpus
    assert all(isinstance(getattr(first, n), (int, float)) for n in GPU_FIELDS)
    assert all(getattr(second, n) == NA("GPU is lost (fell off the bus); a reset or reboot is needed")
               for n in GPU_FIELDS)


def test_sampling_does_not_reopen_nvml_or_reread_static_facts():
    nvml, _, sampler = _h100_sampler()
    for _ in range(20):
        sampler.sample()
    assert nvml.calls["nvmlInit"] == 1
    assert nvml.calls["nvmlDeviceGetCount"] == 1
    assert nvml.calls["nvmlDeviceGetHandleByIndex"] == 1
    assert nvml.calls["nvmlDeviceGetMaxClockInfo"] == 0 and nvml.calls["nvmlDeviceGetName"] == 0
    assert nvml.calls["nvmlDeviceGetPowerUsage"] == 20


def test_without_nvml_or_cuda_sampling_still_reports_host_memory():
    nvml = FakeNvml()
    nvml.fail_init(fk.NVML_ERROR_LIBRARY_NOT_FOUND)
    sampler = TelemetrySampler(nvml=Nvml.open(nvml), cuda=FakeCuda.unavailable("torch was built without CUDA"))
    s = sampler.sample()
    assert s.gpus == []
    assert s.torch_allocated_bytes == NA("torch was built without CUDA")
    assert isinstance(s.torch_reserved_bytes, NA) and isinstance(s.torch_peak_bytes, NA)
    assert s.process_rss_bytes > 0 and s.system_ram_total_bytes > 0


def test_uninitialised_cuda_reports_zero_without_touching_the_allocator():
    nvml, cuda = h100_fakes()
    cuda.initialized = False
    cuda.memory_allocated = cuda.memory_reserved = cuda.max_memory_allocated = None  # would raise if called
    s = TelemetrySampler(nvml=Nvml.open(nvml), cuda=cuda).sample()
    assert (s.torch_allocated_bytes, s.torch_reserved_bytes, s.torch_peak_bytes) == (0, 0, 0)


def test_ring_buffer_never_exceeds_capacity_and_keeps_the_newest():
    _, _, sampler = _h100_sampler(capacity=5)
    taken = [sampler.sample() for _ in range(12)]
    assert len(sampler.history) == 5
    assert sampler.history == taken[-5:]
    with pytest.raises(ValueError):
        TelemetrySampler(nvml=Nvml.open(FakeNvml()), cuda=FakeCuda.unavailable(), capacity=0)


def test_real_box_sampler_never_raises():
    sampler = TelemetrySampler(capacity=3)
    for _ in range(4):
        s = sampler.sample()
    assert len(sampler.history) == 3
    assert s.process_rss_bytes > 0
    assert isinstance(s.torch_allocated_bytes, NA) != torch.cuda.is_available()


# -- release_memory --------------------------------------------------------------------------------------------


def test_release_on_cpu_reports_rss_before_and_after():
    report = release_memory("cpu", cuda=FakeCuda.unavailable())
    assert report.device == "cpu"
    assert report.rss_before_bytes > 0 and report.rss_after_bytes > 0
    assert report.released_bytes == max(0, report.rss_before_bytes - report.rss_after_bytes)
    assert isinstance(report.reserved_before_bytes, NA)
    assert report.summary().startswith(f"released {format_bytes(report.released_bytes)} (RSS ")


def test_release_auto_on_a_cpu_box_picks_cpu():
    assert release_memory("auto", cuda=FakeCuda.unavailable()).device == "cpu"


def test_release_on_fake_cuda_reports_the_reserved_drop():
    nvml, cuda = h100_fakes()
    used_before = nvml.gpus[0].memory_used
    report = release_memory("auto", nvml=Nvml.open(nvml), cuda=cuda)
    assert cuda.empty_cache_calls == 1
    assert report.device == "cuda"
    assert (report.reserved_before_bytes, report.reserved_after_bytes) == (3 * GiB, 1 * GiB)
    assert report.released_bytes == 2 * GiB and report.released_mib == 2048.0
    assert (report.nvml_used_before_bytes, report.nvml_used_after_bytes) == (used_before, used_before - 2 * GiB)
    assert report.summary() == ("released 2.0 GiB (reserved 3.0 GiB -> 1.0 GiB; "
                                "GPU used 3.5 GiB -> 1.5 GiB)")


def test_release_on_one_cuda_index_and_bad_requests():
    nvml, cuda = h100_fakes()
    assert release_memory("cuda:0", nvml=Nvml.open(nvml), cuda=cuda).released_bytes == 2 * GiB
    with pytest.raises(DeviceError, match="only 1 CUDA device"):
        release_memory("cuda:3", nvml=Nvml.open(nvml), cuda=cuda)
    with pytest.raises(DeviceError, match="no CUDA device"):
        release_memory("cuda", cuda=FakeCuda.unavailable())
    with pytest.raises(DeviceError, match="unknown device"):
        release_memory("tpu", cuda=cuda)


def test_release_without_nvml_still_reports_reserved():
    nvml, cuda = h100_fakes()
    nvml.fail_init(fk.NVML_ERROR_LIB_RM_VERSION_MISMATCH)
    report = release_memory("cuda", nvml=Nvml.open(nvml), cuda=cuda)
    assert report.released_bytes == 2 * GiB
    assert isinstance(report.nvml_used_before_bytes, NA) and "versions differ" in report.nvml_used_before_bytes.reason
    assert report.summary() == "released 2.0 GiB (reserved 3.0 GiB -> 1.0 GiB)"


def test_summary_reads_as_one_line():
    report = ReleaseReport("cuda", int(1.2 * GiB), int(0.8 * GiB), NA("x"), NA("x"), 1, 1, 412 * MiB)
    assert report.summary() == "released 412.0 MiB (reserved 1.2 GiB -> 0.8 GiB)"
    assert "\n" not in report.summary()



def test_gpu_sample_is_a_plain_dataclass():
    s = GpuSample(0, 1, 2, 1, 0, 0, 30, 70.0, 345)
    assert s.power_w == 70.0


# -- real GPU -------------------------------------------------------------------------------------------------


@pytest.mark.gpu
@needs_cuda
def test_gpu_sample_agrees_with_torch_cuda():
    sampler = TelemetrySampler()
    x = torch.empty(256 * MiB, dtype=torch.uint8, device="cuda")
    s = sampler.sample()
    assert s.torch_allocated_bytes == torch.cuda.memory_allocated(0) >= 256 * MiB
    assert s.torch_reserved_bytes == torch.cuda.memory_reserved(0)
    assert len(s.gpus) >= 1
    gpu = s.gpus[0]
    free, total = torch.cuda.mem_get_info(0)
    assert gpu.mem_total_bytes == pytest.approx(total, rel=0.02)
    assert gpu.mem_used_bytes >= 256 * MiB
    assert isinstance(gpu.temperature_c, int) and isinstance(gpu.power_w, float) and gpu.sm_clock_mhz > 0
    del x


@pytest.mark.gpu
@needs_cuda
def test_gpu_release_memory_drops_reserved():
    x = torch.empty(512 * MiB, dtype=torch.uint8, device="cuda")
    torch.cuda.synchronize()
    reserved = torch.cuda.memory_reserved(0)
    del x
    report = release_memory("cuda")
    assert report.device == "cuda"
    assert report.reserved_before_bytes == reserved
    assert report.reserved_after_bytes == torch.cuda.memory_reserved(0)
    assert report.released_bytes >= 512 * MiB
    assert isinstance(report.nvml_used_before_bytes, int)
    assert report.nvml_used_before_bytes - report.nvml_used_after_bytes >= 256 * MiB
    assert report.summary().startswith("released ")


def test_process_gpu_memory_is_nvmls_count_for_one_pid():
    from torchperf_tui.engine.hardware.nvml import is_na
    from torchperf_tui.engine.hardware.telemetry import process_gpu_memory

    nvml = Nvml.open(FakeNvml(gpus=[FakeGpu(processes={4242: 3 * GiB, 7: None})]))
    assert process_gpu_memory(nvml, 0, 4242) == 3 * GiB
    assert process_gpu_memory(nvml, 0, 99) == 0  # no CUDA context on that GPU
    assert is_na(process_gpu_memory(nvml, 0, 7))  # NVML without per-process figures (MIG)
