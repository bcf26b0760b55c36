"""The exporter as Prometheus sees it: served on 127.0.0.1 at a free port, scraped with urllib, parsed with
prometheus-client's parser; GPUs from the fake NVML module, outcomes from crafted history files."""

from __future__ import annotations

import pytest

from tests.exporter.helpers import record, scrape, scrape_openmetrics, served, two_gpus, value, write_history
from tests.fakes.fake_nvml import NVML_ERROR_LIBRARY_NOT_FOUND, NVML_ERROR_NOT_SUPPORTED, FakeGpu, FakeNvml
from torchperf_tui.engine.hardware.nvml import Nvml

H100 = "NVIDIA H100 80GB HBM3"


def test_gpu_metrics_use_dcgm_names_and_labels(tmp_path):
    with served(Nvml.open(module=two_gpus()), tmp_path / "history.jsonl") as (_, url):
        samples = scrape(url)
    gpu0 = {"gpu": "0", "UUID": "GPU-aaaa", "device": "nvidia0", "modelName": H100, "hostname": "box-a"}
    assert value(samples, "DCGM_FI_DEV_GPU_UTIL", **gpu0) == 87
    assert value(samples, "DCGM_FI_DEV_MEM_COPY_UTIL", **gpu0) == 40
    assert value(samples, "DCGM_FI_DEV_FB_USED", **gpu0) == 10 * 1024
    assert value(samples, "DCGM_FI_DEV_FB_TOTAL", **gpu0) == 81559
    assert value(samples, "DCGM_FI_DEV_FB_FREE", **gpu0) == 81559 - 10 * 1024
    assert value(samples, "DCGM_FI_DEV_SM_CLOCK", **gpu0) == 1755
    assert value(samples, "DCGM_FI_DEV_MEM_CLOCK", **gpu0) == 2619
    assert value(samples, "DCGM_FI_DEV_GPU_TEMP", **gpu0) == 64
    assert value(samples, "DCGM_FI_DEV_POWER_USAGE", **gpu0) == 312.5
    assert value(samples, "DCGM_FI_DEV_ENFORCED_POWER_LIMIT", **gpu0) == 700
    assert value(samples, "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", **gpu0) == 5_000_000  # mJ, and no _total
    assert value(samples, "DCGM_FI_DEV_CLOCKS_EVENT_REASONS", **gpu0) == 0x4
    assert value(samples, "torchperf_gpu_throttled", **gpu0) == 1
    assert value(samples, "torchperf_gpu_clock_event", **gpu0, clock_event="power_cap") == 1
    assert value(samples, "torchperf_gpu_clock_event", **gpu0, clock_event="sw_thermal") == 0
    # the second GPU is its own series: idle is a clock event, not throttling
    assert value(samples, "DCGM_FI_DEV_GPU_UTIL", gpu="1", UUID="GPU-bbbb", modelName="NVIDIA A100-SXM4-40GB") == 3
    assert value(samples, "torchperf_gpu_throttled", gpu="1") == 0
    assert value(samples, "torchperf_gpu_clock_event", gpu="1", clock_event="gpu_idle") == 1
    assert value(samples, "torchperf_nvml_available", hostname="box-a") == 1
    assert "torchperf_gpu_field_unavailable" not in samples
    assert value(samples, "torchperf_host_memory_total_bytes", hostname="box-a") > 0  # the host beside the GPUs


def test_a_hopper_gpu_serves_dcgm_s_profiling_fields_from_its_gpm_counters_between_scrapes(tmp_path):
    fake = two_gpus()
    fake.gpus[0].gpm = {2: 80.0, 3: 40.0, 5: 60.0, 10: 35.0}  # the H100's; the A100 has none
    with served(Nvml.open(module=fake), tmp_path / "history.jsonl") as (state, url):
        first = scrape(url)
        state.refresh(strict=True)  # the counters are over the time between two readings
        samples = scrape(url)
    assert "DCGM_FI_PROF_SM_ACTIVE" not in first
    assert value(samples, "DCGM_FI_PROF_SM_ACTIVE", gpu="0") == 0.8  # DCGM's ratio, not a percent
    assert value(samples, "DCGM_FI_PROF_SM_OCCUPANCY", gpu="0") == 0.4
    assert value(samples, "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", gpu="0") == 0.6
    assert value(samples, "DCGM_FI_PROF_DRAM_ACTIVE", gpu="0") == 0.35
    assert [s for s in samples["DCGM_FI_PROF_SM_ACTIVE"] if s.labels["gpu"] == "1"] == []  # no GPM: none served
    assert "torchperf_gpu_field_unavailable" not in samples  # a GPU without GPM is no fault
    assert fake.gpm_samples_alive == 1  # the last scrape's sample, kept for the next


def test_prometheus_s_openmetrics_scrape_parses_whole(tmp_path):
    """Prometheus asks for OpenMetrics first; its parser refuses a whole scrape for one bad family."""
    history = tmp_path / "history.jsonl"
    write_history(history, record("resnet18", 10.0, energy_j=0.2), record("resnet18", 5.0, dtype="float16"))
    fake = two_gpus()
    fake.fail("nvmlDeviceGetPowerUsage", NVML_ERROR_NOT_SUPPORTED)
    with served(Nvml.open(module=fake), history) as (_, url):
        text_format, openmetrics = scrape(url), scrape_openmetrics(url)
    assert value(openmetrics, "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", gpu="0") == 5_000_000
    assert value(openmetrics, "torchperf_outcome_latency_seconds", dtype="float16", quantile="0.5") == 0.005
    assert set(openmetrics) == set(text_format)


class _OlderBinding(FakeNvml):
    """nvidia-ml-py before the clock-event rename: only the throttle-reasons query."""

    def nvmlDeviceGetCurrentClocksEventReasons(self, handle):
        raise AttributeError("nvmlDeviceGetCurrentClocksEventReasons")

    def nvmlDeviceGetCurrentClocksThrottleReasons(self, handle):
        return self._enter("nvmlDeviceGetCurrentClocksThrottleReasons", handle).clock_event_reasons


def test_throttle_reasons_come_from_an_older_binding_too(tmp_path):
    fake = _OlderBinding(gpus=[FakeGpu(clock_event_reasons=0x20)])
    with served(Nvml.open(module=fake), tmp_path / "history.jsonl") as (state, url):
        state.refresh()
        samples = scrape(url)
    assert value(samples, "torchperf_gpu_clock_event", gpu="0", clock_event="sw_thermal") == 1
    assert value(samples, "torchperf_gpu_throttled", gpu="0") == 1
    assert fake.calls["nvmlDeviceGetCurrentClocksThrottleReasons"] == 2  # the query found is kept


def test_a_cpu_box_serves_the_cpu_memory_and_why_there_is_no_gpu(tmp_path):
    fake = FakeNvml()
    fake.fail_init(NVML_ERROR_LIBRARY_NOT_FOUND)
    with served(Nvml.open(module=fake), tmp_path / "history.jsonl") as (_, url):
        samples = scrape(url)
    assert not [name for name in samples if name.startswith("DCGM_")]
    available = samples["torchperf_nvml_available"][0]
    assert available.value == 0 and "not found" in available.labels["reason"]
    for name in ("torchperf_host_cpu_utilization_percent", "torchperf_host_cpu_count", "torchperf_host_load1",
                 "torchperf_host_memory_used_bytes", "torchperf_host_memory_total_bytes"):
        assert value(samples, name, hostname="box-a") >= 0, name
    assert value(samples, "torchperf_host_memory_used_bytes") <= value(samples, "torchperf_host_memory_total_bytes")


def test_an_nvml_fault_mid_run_leaves_the_metric_out_and_the_exporter_serving(tmp_path):
    fake = two_gpus()
    with served(Nvml.open(module=fake), tmp_path / "history.jsonl") as (state, url):
        assert value(scrape(url), "DCGM_FI_DEV_POWER_USAGE", gpu="0") == 312.5
        fake.fail("nvmlDeviceGetPowerUsage", NVML_ERROR_NOT_SUPPORTED)
        fake.lose(1)  # GPU 1 falls off the bus
        state.refresh()
        samples = scrape(url)
        assert "DCGM_FI_DEV_POWER_USAGE" not in samples  # GPU 0's query fails, GPU 1 is lost
        assert value(samples, "DCGM_FI_DEV_GPU_UTIL", gpu="0") == 87  # the rest of GPU 0 is still there
        missing = value(samples, "torchperf_gpu_field_unavailable", gpu="0", field="DCGM_FI_DEV_POWER_USAGE")
        assert missing == 1
        reasons = {s.labels["reason"] for s in samples["torchperf_gpu_field_unavailable"] if s.labels["gpu"] == "0"}
        assert reasons == {"not supported on this GPU"}
        assert value(samples, "torchperf_gpu_up", gpu="0") == 1
        assert value(samples, "torchperf_gpu_up", gpu="1", UUID="GPU-bbbb") == 0  # its identity read before is kept
        lost = {s.labels["reason"] for s in samples["torchperf_gpu_field_unavailable"] if s.labels["gpu"] == "1"}
        assert "GPU is lost (fell off the bus); a reset or reboot is needed" in lost
        fake.clear_failures()  # the GPU comes back after a reset: so do its metrics
        state.refresh()
        assert value(scrape(url), "DCGM_FI_DEV_POWER_USAGE", gpu="1") == 70
        assert value(scrape(url), "torchperf_exporter_reading_errors") == 0


def test_outcomes_are_the_newest_record_of_each_setup_and_follow_the_file(tmp_path):
    history = tmp_path / "history.jsonl"
    write_history(history,
                  record("resnet18", 12.0, created="2026-11-20T10:00:00+00:00"),
                  record("resnet18", 10.0, created="2026-11-21T10:00:00+00:00"),  # the same set-up, newer
                  record("resnet18", 6.0, dtype="float16", energy_j=0.25),
                  record("hf:llama", 4.0, details={"model_args": "num_hidden_layers=2"}, flags_text="sdpa flash"),
                  junk='{"id": "torn')
    warnings: list[str] = []
    with served(Nvml.open(module=FakeNvml()), history, warnings) as (state, url):
        samples = scrape(url)
        fp32 = {"model": "resnet18", "model_args": "", "input": "1x3x224x224", "dtype": "float32",
                "flags": "defaults", "device": "cuda:0", "host": "box-a", "per": "pass"}
        assert value(samples, "torchperf_outcome_latency_seconds", **fp32, quantile="0.5") == pytest.approx(0.010)
        assert value(samples, "torchperf_outcome_latency_seconds", **fp32, quantile="0.9") == pytest.approx(0.012)
        assert value(samples, "torchperf_outcome_latency_seconds", **fp32, quantile="0.99") == pytest.approx(0.020)
        assert value(samples, "torchperf_outcome_samples_per_second", **fp32) == pytest.approx(100.0)
        assert value(samples, "torchperf_outcome_timestamp_seconds", **fp32) == 1795255200  # 2026-11-21T10:00Z
        assert value(samples, "torchperf_outcome_timed_samples", **fp32) == 64
        assert value(samples, "torchperf_outcome_energy_joules_per_item", dtype="float16") == 0.25
        assert [s.labels["dtype"] for s in samples["torchperf_outcome_energy_joules_per_item"]] == ["float16"]
        assert value(samples, "torchperf_outcome_latency_seconds", model="hf:llama", quantile="0.5",
                     model_args="num_hidden_layers=2", flags="sdpa flash") == pytest.approx(0.004)
        assert value(samples, "torchperf_history_records") == 4
        assert value(samples, "torchperf_history_setups") == 3
        assert value(samples, "torchperf_history_skipped_lines") == 1
        assert len(warnings) == 1 and "skipped" in warnings[0] and "truncated" not in warnings[0]

        state.refresh()  # the file did not change: not read again, no second warning
        assert len(warnings) == 1
        write_history(history, record("resnet18", 8.0, host="box-b"))  # another host's run of the same set-up
        state.refresh()
        samples = scrape(url)
        assert value(samples, "torchperf_outcome_latency_seconds", **{**fp32, "host": "box-b"}, quantile="0.5") == 0.008
        assert value(samples, "torchperf_outcome_latency_seconds", **fp32, quantile="0.5") == pytest.approx(0.010)
        assert value(samples, "torchperf_history_setups") == 4
        assert len(warnings) == 1  # the same corrupt line is not said again at each change of the file


def test_a_history_that_turns_unreadable_keeps_its_outcomes_and_says_so_once(tmp_path):
    history = tmp_path / "history.jsonl"
    write_history(history, record("resnet18", 10.0))
    warnings: list[str] = []
    with served(Nvml.open(module=FakeNvml()), history, warnings) as (state, url):
        history.unlink()
        history.mkdir()  # a folder where the file was
        state.refresh()
        state.refresh()
        samples = scrape(url)
    assert value(samples, "torchperf_history_readable") == 0
    assert value(samples, "torchperf_outcome_latency_seconds", model="resnet18", quantile="0.5") == 0.010
    assert len(warnings) == 1 and "not a regular file" in warnings[0], warnings


def test_cancelled_and_sample_less_records_are_not_outcomes(tmp_path):
    history = tmp_path / "history.jsonl"
    cancelled = record("resnet18", 10.0)
    cancelled.cancelled = True
    empty = record("resnet50", 10.0)
    empty.stats = None
    write_history(history, cancelled, empty)
    with served(Nvml.open(module=FakeNvml()), history) as (_, url):
        samples = scrape(url)
    assert "torchperf_outcome_latency_seconds" not in samples
    assert value(samples, "torchperf_history_records") == 2


def test_generation_outcomes_are_per_token_with_tokens_per_second(tmp_path):
    history = tmp_path / "history.jsonl"
    write_history(history, record("hf:llama", 5.0, kind="generate",
                                  details={"tokens_per_s": 190.5, "new_tokens": 16, "prompt_len": 32}))
    with served(Nvml.open(module=FakeNvml()), history) as (_, url):
        samples = scrape(url)
    labels = {"model": "hf:llama", "per": "token", "flags": "defaults · generate 16 after 32"}
    assert value(samples, "torchperf_outcome_latency_seconds", **labels, quantile="0.5") == 0.005
    assert value(samples, "torchperf_outcome_samples_per_second", **labels) == 190.5
