"""The NVML seam: opening never raises, and every NVML failure becomes NA with a readable reason."""

from __future__ import annotations

import json
import sys

import pytest

from tests.fakes import fake_nvml as fk
from tests.fakes.fake_nvml import FakeGpu, FakeNvml
from torchperf_tui.engine.hardware import nvml as nvml_mod
from torchperf_tui.engine.hardware.nvml import NA, Nvml, default_nvml, is_na, to_jsonable


def test_na_reads_as_unavailable_and_is_falsy():
    na = NA("not supported on this GPU")
    assert str(na) == "n/a (not supported on this GPU)"
    assert not na
    assert is_na(na) and not is_na(0)
    assert na == NA("not supported on this GPU")
    with pytest.raises(AttributeError):
        na.reason = "other"  # frozen: shared NA values cannot be changed under another field


def test_to_jsonable_writes_na_as_text_inside_nested_values():
    data = to_jsonable({"a": [NA("gone"), 1], "b": (b"bytes", NA("x"))})
    assert data == {"a": ["n/a (gone)", 1], "b": ["bytes", "n/a (x)"]}
    json.dumps(data)


def test_open_with_fake_initialises_once_and_answers_queries():
    fake = FakeNvml(gpus=[FakeGpu(), FakeGpu(name="NVIDIA A100-SXM4-40GB")])
    nvml = Nvml.open(fake)
    assert nvml.available and nvml.reason is None
    assert nvml.device_count() == 2
    assert nvml.query(1, "nvmlDeviceGetName") == "NVIDIA A100-SXM4-40GB"
    assert nvml.query_system("nvmlSystemGetDriverVersion") == "580.159.04"
    assert fake.calls["nvmlInit"] == 1


def test_handles_and_count_are_cached():
    fake = FakeNvml()
    nvml = Nvml.open(fake)
    for _ in range(5):
        nvml.device_count()
        nvml.query(0, "nvmlDeviceGetPowerUsage")
    assert fake.calls["nvmlDeviceGetHandleByIndex"] == 1
    assert fake.calls["nvmlDeviceGetCount"] == 1
    assert fake.calls["nvmlDeviceGetPowerUsage"] == 5


def test_bytes_names_from_older_pynvml_are_decoded():
    nvml = Nvml.open(FakeNvml(gpus=[FakeGpu(name="Tesla V100-SXM2-16GB", name_as_bytes=True)]))
    assert nvml.query(0, "nvmlDeviceGetName") == "Tesla V100-SXM2-16GB"
    assert nvml.query_system("nvmlSystemGetDriverVersion") == "580.159.04"


@pytest.mark.parametrize(
    ("code", "words"),
    fk.reason_words(fk.NVML_ERROR_LIBRARY_NOT_FOUND, fk.NVML_ERROR_LIB_RM_VERSION_MISMATCH,
                    fk.NVML_ERROR_DRIVER_NOT_LOADED, fk.NVML_ERROR_NO_PERMISSION),
)
def test_init_failure_gives_unavailable_with_reason(code, words):
    fake = FakeNvml()
    fake.fail_init(code)
    nvml = Nvml.open(fake)
    assert nvml.available is False
    assert words in nvml.reason and nvml.reason.startswith("NVML init failed")
    assert nvml.device_count() == 0
    answer = nvml.query(0, "nvmlDeviceGetName")
    assert isinstance(answer, NA) and words in answer.reason
    assert fake.calls["nvmlDeviceGetName"] == 0  # nothing is called on a library that failed to start


def test_missing_pynvml_package_is_reported(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)  # makes `import pynvml` raise ImportError
    nvml = Nvml.open()
    assert nvml.available is False
    assert "nvidia-ml-py" in nvml.reason
    assert isinstance(nvml.query(0, "nvmlDeviceGetName"), NA)
    nvml.shutdown()  # harmless on an unavailable instance


@pytest.mark.parametrize(
    ("code", "words"),
    [
        *fk.QUERY_ERRORS,
        *fk.reason_words(fk.NVML_ERROR_UNKNOWN),
        (4242, "NVML error 4242"),  # a code this release does not know still reads as NVML's
    ],
)
def test_query_error_becomes_na_for_that_call_only(code, words):
    fake = FakeNvml()
    nvml = Nvml.open(fake)
    fake.fail("nvmlDeviceGetPowerUsage", code)
    answer = nvml.query(0, "nvmlDeviceGetPowerUsage")
    assert isinstance(answer, NA) and words in answer.reason
    assert nvml.query(0, "nvmlDeviceGetTemperature", fk.NVML_TEMPERATURE_GPU) == 31
    fake.clear_failures()
    assert nvml.query(0, "nvmlDeviceGetPowerUsage") == 70_000  # recovers when the GPU does


def test_function_missing_from_module_and_foreign_exceptions_become_na():
    class Broken(FakeNvml):
        def nvmlDeviceGetTemperature(self, handle, sensor):
            raise RuntimeError("driver hiccup")

    nvml = Nvml.open(Broken())
    missing = nvml.query(0, "nvmlDeviceGetSomethingNew")
    assert isinstance(missing, NA) and "lacks the call" in missing.reason
    foreign = nvml.query(0, "nvmlDeviceGetTemperature", 0)
    assert isinstance(foreign, NA) and "driver hiccup" in foreign.reason


def test_handle_failure_degrades_every_query_on_that_gpu():
    fake = FakeNvml()
    nvml = Nvml.open(fake)
    fake.fail("nvmlDeviceGetHandleByIndex", fk.NVML_ERROR_GPU_IS_LOST, times=1)
    lost = nvml.query(0, "nvmlDeviceGetName")
    assert isinstance(lost, NA) and "GPU is lost" in lost.reason
    assert nvml.query(0, "nvmlDeviceGetName") == "NVIDIA H100 80GB HBM3"  # a failed handle is not cached


def test_shutdown_is_idempotent_and_later_queries_answer_na():
    fake = FakeNvml()
    nvml = Nvml.open(fake)
    nvml.shutdown()
    nvml.shutdown()
    assert fake.calls["nvmlShutdown"] == 1
    assert not nvml.available
    assert isinstance(nvml.query(0, "nvmlDeviceGetName"), NA)


def test_real_pynvml_open_never_raises():
    nvml = Nvml.open()
    try:
        if nvml.available:
            assert nvml.device_count() >= 0
        else:
            assert nvml.reason  # says why, e.g. "NVML library ... not found" on a CPU box
    finally:
        nvml.shutdown()


def test_default_nvml_is_one_lazily_opened_instance(monkeypatch):
    monkeypatch.setattr(nvml_mod, "_default", None)
    opened = []
    monkeypatch.setattr(Nvml, "open", classmethod(lambda cls, module=None: opened.append(1) or cls(None, False, "x")))
    first = default_nvml()
    assert default_nvml() is first
    assert opened == [1]


@pytest.mark.parametrize("function, bad", [
    ("nvmlDeviceGetMemoryInfo", None),
    ("nvmlDeviceGetMemoryInfo", 7),
    ("nvmlDeviceGetMemoryInfo", "8 GiB"),
    ("nvmlDeviceGetUtilizationRates", object()),
    ("nvmlDeviceGetPowerUsage", "300 W"),
    ("nvmlDeviceGetPowerUsage", None),
    ("nvmlDeviceGetTemperature", -5),
    ("nvmlDeviceGetTemperature", True),
    ("nvmlDeviceGetClockInfo", 1.5),
    ("nvmlDeviceGetName", 42),
    ("nvmlDeviceGetCudaComputeCapability", "9.0"),
    ("nvmlDeviceGetHandleByIndex", None),
])
def test_a_malformed_value_from_nvml_is_na_at_the_seam(monkeypatch, function, bad):
    fake = FakeNvml()
    monkeypatch.setattr(fake, function, lambda *args, **kwargs: bad)
    nvml = Nvml.open(fake)
    if function == "nvmlDeviceGetHandleByIndex":
        value = nvml.query(0, "nvmlDeviceGetMemoryInfo")
    else:
        value = nvml.query(0, function, *([0] if function in ("nvmlDeviceGetTemperature",
                                                              "nvmlDeviceGetClockInfo") else []))
    assert is_na(value) and "malformed" in value.reason and function in value.reason


def test_malformed_nvml_values_leave_the_rest_of_a_telemetry_sample(monkeypatch):
    from tests.fakes.fake_cuda import FakeCuda
    from torchperf_tui.engine.hardware.telemetry import TelemetrySampler

    fake = FakeNvml()
    monkeypatch.setattr(fake, "nvmlDeviceGetMemoryInfo", lambda *a, **k: None)
    monkeypatch.setattr(fake, "nvmlDeviceGetUtilizationRates", lambda *a, **k: "busy")
    monkeypatch.setattr(fake, "nvmlDeviceGetPowerUsage", lambda *a, **k: "300 W")
    sample = TelemetrySampler(nvml=Nvml.open(fake), cuda=FakeCuda.unavailable()).sample()
    gpu = sample.gpus[0]
    assert is_na(gpu.mem_used_bytes) and is_na(gpu.util_gpu_pct) and is_na(gpu.power_w)
    assert not is_na(gpu.temperature_c)
    assert isinstance(sample.process_rss_bytes, int) and sample.process_rss_bytes > 0
