"""The GPU's other tenants (engine/hardware/gpu_tenants.py) on the fake NVML: another process on the GPU during a
run (compute or graphics, its memory and SM share, MIG or MPS) is recorded in the run's conditions and marks it
disturbed, in its result, its JSON and its history record (which the gate reads), as a busy host marks it; this
process is never its own tenant, and an A/B says it per arm."""

from __future__ import annotations

import itertools
import os

import pytest

from tests.fakes.fake_nvml import FakeGpu, FakeNvml
from torchperf_tui.engine.hardware.condition_sampler import ConditionSampler
from torchperf_tui.engine.hardware.gpu_tenants import Tenant, tenant_marks
from torchperf_tui.engine.hardware.nvml import Nvml

GiB = 1024**3
TINY = "tests.tinymodels:tiny_cnn"


def _sampler(gpu: FakeGpu) -> tuple[FakeNvml, ConditionSampler]:
    fake = FakeNvml(gpus=[gpu])
    ticks = itertools.count()
    return fake, ConditionSampler(Nvml.open(fake), 0, period_s=None, clock=lambda: float(next(ticks)))


def test_another_process_on_the_gpu_is_recorded_with_its_memory_and_sm_share_and_this_one_is_not(monkeypatch):
    monkeypatch.setattr("torchperf_tui.engine.hardware.gpu_tenants.process_name",
                        lambda pid: {4242: "ffmpeg", 777: "python"}.get(pid, ""))
    gpu = FakeGpu(processes={os.getpid(): 3 * GiB}, graphics_processes={4242: GiB}, process_sm={4242: 35})
    fake, sampler = _sampler(gpu)
    sampler.begin("timed")
    gpu.processes[777] = 2 * GiB  # a second job arrives during the run
    gpu.graphics_processes[4242] = 2 * GiB
    sampler.end("timed")
    c = sampler.summary("timed", items=10)
    assert [(t.pid, t.name, t.kind, t.memory_bytes, t.sm_pct) for t in c.tenants] == [
        (777, "python", "compute", 2 * GiB, None), (4242, "ffmpeg", "graphics", 2 * GiB, 35)]
    assert c.sharing == ""
    mark, = tenant_marks(c)
    assert mark == ("other processes on the GPU: pid 777 (python, compute, 2.0 GiB); pid 4242 (ffmpeg, graphics, "
                    "2.0 GiB, SM 35 %)")
    assert c.fingerprint()["gpu_other_processes"] == 2
    assert c.to_dict()["tenants"][1]["sm_pct"] == 35


def test_alone_on_the_gpu_nothing_is_said_and_mig_or_mps_is_named_when_shared(monkeypatch):
    monkeypatch.setattr("torchperf_tui.engine.hardware.gpu_tenants.process_name",
                        lambda pid: "nvidia-cuda-mps-server" if pid == 99 else "")
    _, alone = _sampler(FakeGpu(processes={os.getpid(): GiB}))
    alone.begin("timed")
    alone.end("timed")
    c = alone.summary("timed", items=1)
    assert c.tenants == [] and tenant_marks(c) == [] and c.fingerprint()["gpu_other_processes"] == 0
    _, shared = _sampler(FakeGpu(processes={os.getpid(): GiB, 99: None}, mig_mode=1))
    shared.begin("timed")
    shared.end("timed")
    c = shared.summary("timed", items=1)
    assert c.sharing == "MIG on, MPS"
    assert tenant_marks(c) == ["other processes on the GPU: pid 99 (nvidia-cuda-mps-server, compute) (MIG on, MPS)"]


def test_a_gpu_that_lists_no_processes_says_why_among_what_could_not_be_read():
    fake, sampler = _sampler(FakeGpu())
    fake.fail("nvmlDeviceGetComputeRunningProcesses", 3)
    sampler.begin("timed")
    sampler.end("timed")
    c = sampler.summary("timed", items=1)
    assert c.tenants == [] and c.missing["processes"] == "not supported on this GPU"


def test_a_run_beside_another_tenant_is_marked_disturbed_in_its_result_and_history_record(fake_gpu_conditions):
    from torchperf_tui.engine.measurements.bench_config import BenchConfig
    from torchperf_tui.engine.measurements.timing import run_benchmark
    from torchperf_tui.engine.records.result_records import records_of

    fake_gpu_conditions.gpus[0].graphics_processes[4242] = GiB
    result = run_benchmark(BenchConfig(model=TINY, input_shape=(1, 3, 8, 8), device="cpu", warmup=0, iters=3))
    marks = [m for m in result.disturbance_marks() if m.startswith("other processes on the GPU: pid 4242")]
    assert len(marks) == 1
    assert result.to_dict()["conditions"]["tenants"][0]["pid"] == 4242
    record = records_of(result, fingerprint={})[0]
    assert any(line.startswith("other processes on the GPU: pid 4242") for line in record.disturbed)
    assert record.fingerprint["gpu_other_processes"] == 1


def test_an_ab_says_the_other_tenant_per_arm(fake_gpu_conditions):
    from torchperf_tui.engine.measurements.ab_arms import parse_arm_spec
    from torchperf_tui.engine.measurements.abtest import run_ab
    from torchperf_tui.engine.measurements.bench_config import BenchConfig

    fake_gpu_conditions.gpus[0].processes.update({os.getpid(): GiB, 555: GiB})
    result = run_ab(BenchConfig(model=TINY, input_shape=(1, 3, 8, 8), device="cpu"), parse_arm_spec(""),
                    parse_arm_spec("threads=1"), blocks=6, per_block=2)
    marks = result.disturbance_marks()
    assert any(m.startswith("arm A: other processes on the GPU: pid 555") for m in marks)
    assert any(m.startswith("arm B: other processes on the GPU: pid 555") for m in marks)


def test_a_tenant_kept_as_a_dict_reads_back_in_the_same_words():
    tenant = Tenant(4242, "ffmpeg", "graphics", GiB, 35.0)
    from dataclasses import asdict

    kept = type("Kept", (), {"tenants": [asdict(tenant)], "sharing": ""})()
    assert tenant_marks(kept) == [f"other processes on the GPU: {tenant.text()}"]


def test_why_names_the_other_tenant_among_its_marks(fake_gpu_conditions):
    from torchperf_tui.engine.analysis.advisor import advise
    from torchperf_tui.engine.measurements.bench_config import BenchConfig

    fake_gpu_conditions.gpus[0].processes.update({os.getpid(): GiB, 555: GiB})
    advice = advise(BenchConfig(model=TINY, input_shape=(1, 3, 8, 8), device="cpu", warmup=0, iters=3),
                    budget_s=None, verify=0)
    assert any(m.startswith("other processes on the GPU: pid 555") for m in advice.disturbance_marks())


def test_the_pcie_link_is_read_under_load_in_the_conditions_and_at_the_probe_in_the_device_facts():
    from torchperf_tui.engine.hardware.nvml import pcie_link
    from torchperf_tui.wording.device import pcie_text

    fake, sampler = _sampler(FakeGpu(pcie_link=(4, 8, 5, 16)))  # a card in a slot that runs it at half its link
    sampler.begin("timed")
    sampler.end("timed")
    c = sampler.summary("timed", items=1)
    assert c.pcie == "Gen4 x8 (max Gen5 x16)" and c.fingerprint()["gpu_pcie"] == c.pcie
    nvml = Nvml.open(fake)
    assert pcie_text(pcie_link(nvml, 0)) == "Gen4 x8 (max Gen5 x16) at the probe (lower when idle)"
    fake.fail("nvmlDeviceGetCurrPcieLinkWidth", 3)
    assert pcie_text(pcie_link(nvml, 0)) == "n/a (not supported on this GPU)"


def test_in_another_pid_namespace_no_process_is_told_apart_and_an_idle_tenant_or_a_child_is_no_disturbance(
        monkeypatch):
    # a container: NVML lists the host's pids, this process's own (here 123456) not among them
    _, contained = _sampler(FakeGpu(processes={123456: 3 * GiB, 777: GiB}))
    contained.begin("timed")
    contained.end("timed")
    c = contained.summary("timed", items=1)
    assert c.tenants == [] and tenant_marks(c) == []
    assert c.missing["processes"].startswith("NVML's process ids are another PID namespace's (a container?)")
    # a compile worker of this process's (its child) is this process's; a tenant sampled idle is listed, not a mark
    monkeypatch.setattr("torchperf_tui.engine.hardware.gpu_tenants.own_pids", lambda pid: {pid, 31337})
    _, sampler = _sampler(FakeGpu(processes={os.getpid(): GiB, 31337: GiB, 888: GiB}, process_sm={888: 0}))
    sampler.begin("timed")
    sampler.end("timed")
    c = sampler.summary("timed", items=1)
    assert [(t.pid, t.sm_pct) for t in c.tenants] == [(888, 0)] and tenant_marks(c) == []


def test_a_search_under_a_latency_budget_reads_the_gpu_over_its_batches_and_names_another_tenant(fake_gpu_conditions):
    from torchperf_tui.core.slo import parse_slo
    from torchperf_tui.engine.measurements.bench_config import BenchConfig
    from torchperf_tui.engine.measurements.throughput import find_slo_batch

    fake_gpu_conditions.gpus[0].processes.update({os.getpid(): GiB, 555: GiB})
    result = find_slo_batch(BenchConfig(model=TINY, input_shape=(1, 3, 8, 8), device="cpu"), parse_slo("p50=5s"),
                            max_batch=2, time_budget_s=None)
    assert result.conditions is not None and result.conditions.windows == 2  # batches 1 and 2, a window each
    assert result.conditions.items == 9 * 1 + 9 * 2
    assert any(m.startswith("other processes on the GPU: pid 555") for m in result.disturbance_marks())
