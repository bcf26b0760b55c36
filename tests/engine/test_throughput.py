import gc
import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from torch import nn

from torchperf_tui.engine.measurements.batch_search import BatchTry, MemoryCapExceeded, StopRule, is_out_of_memory, search_max_batch
from torchperf_tui.engine.measurements.bench_config import BenchConfig
from torchperf_tui.core.errors import OutOfMemory, ShapeError
from torchperf_tui.engine.hardware.nvml import NA, Nvml
from torchperf_tui.engine.hardware.telemetry import release_memory
from torchperf_tui.engine.measurements.throughput import DEFAULT_TIME_BUDGET_S, find_max_batch
from tests.fakes.fake_cuda import h100_fakes
from tests.fakes.fake_nvml import MiB
from tests.fakes.fake_tries import PEAK_AT_8, FakeClock, oom_above, rate_curve, slow_passes

TINY = "tests.tinymodels:tiny_cnn"
CAPPED = "tests.engine.test_throughput:cnn_oom_above_12"
HUNGRY = "tests.engine.test_throughput:forty_mib_per_sample"
STEP = "tests.engine.test_throughput:step_hungry"


# -- seams ---------------------------------------------------------------------------------------------


class OomAbove(nn.Module):
    """The tiny CNN, but a batch above `limit` allocates part of its activations and then raises the real
    exception type a CUDA allocation failure raises (as a real OOM does, half-way through a forward)."""

    def __init__(self, limit: int) -> None:
        super().__init__()
        self.limit = limit
        self.seen: list[int] = []
        self.net = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.AdaptiveAvgPool2d(1), nn.Flatten())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.seen.append(x.shape[0])
        if x.shape[0] > self.limit:
            partial = torch.empty(x.shape[0], 1024)  # noqa: F841 - pinned by the traceback's frame
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
        return self.net(x)


def cnn_oom_above_12() -> nn.Module:
    return OomAbove(12)


class FortyMiBPerSample(nn.Module):
    """Touches 40 MiB of fresh memory per sample, so its peak RSS growth is known (glibc always mmaps
    blocks over 32 MiB and unmaps them on free, where smaller ones may be kept for reuse unseen)."""

    seen: list[int] = []

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        FortyMiBPerSample.seen.append(x.shape[0])
        big = torch.ones(x.shape[0], 10 * MiB)  # float32: 40 MiB per sample, every page written
        return big.sum(1, keepdim=True) + x.flatten(1)[:, :1]


def forty_mib_per_sample() -> nn.Module:
    return FortyMiBPerSample()


class StepHungry(nn.Module):
    """20 MiB per sample up to batch 4, then 100 MiB per sample (as a kernel that switches to an algorithm
    with a workspace does): a straight line through the small batches underestimates batch 8, which runs and
    goes over a 300 MiB cap."""

    seen: list[int] = []

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch = x.shape[0]
        StepHungry.seen.append(batch)
        per_sample = (20 if batch <= 4 else 100) * MiB // 4  # float32 elements
        big = torch.ones(batch, per_sample)  # every page written
        return big.sum(1, keepdim=True) + x.flatten(1)[:, :1]


def step_hungry() -> nn.Module:
    return StepHungry()


# -- the search with torch's own errors (tests/engine/test_batch_search.py: the search alone) --------------


def test_allocation_failures_that_surface_as_runtime_errors_count_as_out_of_memory():
    assert is_out_of_memory(torch.OutOfMemoryError("x"))
    assert is_out_of_memory(MemoryCapExceeded("over the cap"))
    assert is_out_of_memory(RuntimeError("DefaultCPUAllocator: can't allocate memory: you tried..."))
    assert is_out_of_memory(RuntimeError("cuDNN error: CUDNN_STATUS_ALLOC_FAILED"))
    assert not is_out_of_memory(RuntimeError("Given groups=1, weight of size [8, 3, 3, 3]"))


class _FakeTensor:
    """Holds bytes of a fake CUDA allocator for as long as it lives, like a real tensor."""

    def __init__(self, cuda, nbytes: int) -> None:
        self.cuda, self.nbytes = cuda, nbytes
        cuda.allocate(0, nbytes)

    def __del__(self) -> None:
        self.cuda.free(0, self.nbytes)


def test_allocator_returns_to_its_baseline_after_a_search_with_failures():
    """An OOM's traceback pins the failed try's tensors: the search must drop it, then empty the cache."""
    nvml_module, cuda = h100_fakes()
    nvml = Nvml.open(nvml_module)
    allocated0 = cuda.memory_allocated(0)

    def try_batch(batch: int, warmup: int, iters: int):
        activations = _FakeTensor(cuda, batch * 64 * MiB)  # noqa: F841 - freed when this frame dies
        if batch > 20:
            raise torch.OutOfMemoryError("CUDA out of memory")
        return [2.0] * iters

    out = search_max_batch(try_batch, max_batch=1024,
                           release=lambda: release_memory("cuda", nvml=nvml, cuda=cuda))
    assert out.max_batch == 20
    assert cuda.memory_allocated(0) == allocated0
    assert cuda.memory_reserved(0) == allocated0  # the cache was emptied too
    assert cuda.max_memory_allocated(0) >= 32 * 64 * MiB  # the failing tries did allocate


# -- a real model on the CPU ---------------------------------------------------------------------------


def test_real_model_out_of_memory_path_and_final_measurement():
    seen: list[BatchTry] = []
    cfg = BenchConfig(model=CAPPED, input_shape=(1, 3, 8, 8), device="cpu")
    # to_oom: the plateau rule, which a loaded box's noisy rates can end early (at batch 4 under a full test run),
    # is off: the out-of-memory path is what is tested here.
    result = find_max_batch(cfg, max_batch=64, measure_iters=4, on_progress=seen.append, to_oom=True,
                            time_budget_s=None)
    assert result.max_batch == 12 and not result.hit_bound and not result.cancelled
    assert [t.batch for t in result.points] == [1, 2, 4, 8, 12]
    assert all(p.samples_per_s > 0 and p.latency_ms > 0 for p in result.points)
    # The longer measurement runs at the batch whose try gave the most samples/s, not at the largest.
    best = max(result.points, key=lambda p: p.samples_per_s)
    assert result.best_batch == best.batch == result.measurement.batch and result.measurement.iters == 4
    assert result.best_try_samples_per_s == best.samples_per_s
    assert result.samples_per_s == result.measurement.samples_per_s > 0
    assert result.stop_rule is StopRule.OOM and result.limit_found and result.first_failure == 13
    assert seen[-1] is result.measurement and seen[:-1] == result.tries
    assert isinstance(result.allocator_before_bytes, NA) and result.memory_cap_bytes > 0
    assert result.sample_shape == (3, 8, 8)
    data = result.to_dict()
    assert data["max_batch"] == 12 and len(data["points"]) == 5
    assert data["allocator_before_bytes"].startswith("n/a")


def test_samples_per_second_of_a_try_is_by_its_median_and_of_the_measurement_by_total_time():
    def try_batch(batch, warmup, iters):
        if batch > 8:
            raise torch.OutOfMemoryError("no")
        return [10.0, 10.0, 20.0][:iters] if iters <= 3 else [10.0] * (iters - 1) + [30.0]

    cfg = BenchConfig(model=TINY, input_shape=(1, 3, 8, 8), device="cpu")
    result = find_max_batch(cfg, max_batch=64, try_iters=3, measure_iters=5, try_batch=try_batch)
    assert result.max_batch == 8
    # A try's rate is batch / median latency: its one slow iteration of three does not steer the search.
    assert result.points[0].samples_per_s == pytest.approx(1 / 0.010)
    assert result.points[0].latency_ms == 10.0
    # The measurement's is iterations x batch / total time: what a sustained run delivers.
    assert result.samples_per_s == pytest.approx(5 * 8 / 0.070)  # 4 x 10 ms + 30 ms


def test_the_default_time_budget_bounds_the_whole_search_and_its_measurement():
    clock = FakeClock()
    cfg = BenchConfig(model=TINY, input_shape=(1, 3, 8, 8), device="cpu")
    result = find_max_batch(cfg, try_batch=slow_passes(clock), clock=clock)  # samples/s rises with batch
    assert result.time_budget_s == DEFAULT_TIME_BUDGET_S == 120
    # A try counts 5 passes and the measurement 14: 64 (about 2 x 18.5 s x (1 + 14/5) = 141 s with the
    # measurement after it) is not started at 46.5 s; 32 is measured (51.8 s).
    assert [t.batch for t in result.tries] == [1, 2, 4, 8, 16, 32]
    assert result.stop_rule is StopRule.TIME_BUDGET and result.best_batch == 32
    assert result.duration_s == pytest.approx(46.5 + 14 * 3.7) and result.duration_s <= 120
    assert result.time_text() == "98.3 s of the 120 s budget"
    assert result.limit_text() == "not searched past 32: stopped by time-budget"
    data = json.loads(json.dumps(result.to_dict()))
    assert data["stop_rule"] == "time-budget" and data["time_budget_s"] == 120 and data["best_batch"] == 32
    assert data["stop_reason"].startswith("stopped growing at batch 32: batch 64 would take about")


def test_result_reports_the_best_rate_and_its_batch_beside_the_largest_batch_that_fits():
    cfg = BenchConfig(model=TINY, input_shape=(1, 3, 8, 8), device="cpu")
    seen: list[BatchTry] = []
    result = find_max_batch(cfg, to_oom=True, try_batch=rate_curve(PEAK_AT_8, limit=40), on_progress=seen.append)
    assert (result.max_batch, result.first_failure, result.limit_found) == (40, 41, True)
    assert result.best_batch == 8 and result.measurement.batch == 8 and result.measurement.phase == "measure"
    assert result.samples_per_s == pytest.approx(400) and result.best_try_samples_per_s == pytest.approx(400)
    assert result.to_oom and result.stop_rule is StopRule.OOM and seen[-1] is result.measurement
    assert result.limit_text() == "40 (41 does not fit)"
    assert result.headline().startswith("best 400.0 samples/s at batch 8 · largest batch that fits: 40 (41 does")
    plateau = find_max_batch(cfg, try_batch=rate_curve(PEAK_AT_8, limit=40))
    assert plateau.stop_rule is StopRule.PLATEAU and plateau.best_batch == 8 and plateau.max_batch == 32
    assert plateau.limit_text() == "not searched past 32: stopped by plateau"  # 40 is not claimed


def test_a_best_batch_that_fails_its_measurement_is_not_counted_as_fitting_and_the_next_best_is_measured():
    def try_batch(batch, warmup, iters):
        if iters == 5 and batch > 4:  # the measurement: memory noise makes 8 go over this time
            raise MemoryCapExceeded("went over the CPU memory cap: used about 1 GiB, cap 512 MiB")
        return [1.0 + batch / 100] * iters  # samples/s rises with batch

    cfg = BenchConfig(model=TINY, input_shape=(1, 3, 8, 8), device="cpu")
    seen: list[BatchTry] = []
    result = find_max_batch(cfg, max_batch=8, measure_iters=5, try_batch=try_batch, on_progress=seen.append)
    assert [(t.batch, t.fits) for t in seen if t.phase == "measure"] == [(8, False), (4, True)]
    assert result.best_batch == 4 and result.measurement is seen[-1] and result.samples_per_s > 0
    assert result.max_batch == 4 and result.first_failure == 8
    assert any("batch 8 fitted in the search but not in the longer measurement" in n for n in result.notes)


def test_a_measurement_far_off_its_own_try_says_the_machine_changed_speed():
    def try_batch(batch, warmup, iters):
        slow = 20 if iters == 5 else 1  # another process took the cores after the search
        return [slow * (1.0 + batch / 100)] * iters

    cfg = BenchConfig(model=TINY, input_shape=(1, 3, 8, 8), device="cpu")
    result = find_max_batch(cfg, max_batch=8, measure_iters=5, try_batch=try_batch)
    assert any("the machine's speed changed during the search" in n for n in result.notes), result.notes
    steady = find_max_batch(cfg, max_batch=8, measure_iters=5, try_batch=oom_above(100))
    assert not any("speed changed" in n for n in steady.notes)


def test_a_search_whose_batches_cannot_be_measured_is_an_error_not_a_result_without_a_rate():
    def try_batch(batch, warmup, iters):
        if iters == 5:
            raise torch.OutOfMemoryError("CUDA out of memory")
        return [1.0] * iters

    cfg = BenchConfig(model=TINY, input_shape=(1, 3, 8, 8), device="cpu")
    with pytest.raises(OutOfMemory, match="no batch that fitted in the search could be measured"):
        find_max_batch(cfg, max_batch=8, measure_iters=5, try_batch=try_batch)


def test_no_batch_fitting_is_an_error():
    cfg = BenchConfig(model=TINY, input_shape=(1, 3, 8, 8), device="cpu")
    with pytest.raises(OutOfMemory, match="even batch 1 does not fit on cpu: CUDA out of memory at batch 1"):
        find_max_batch(cfg, max_batch=8, try_batch=oom_above(0))


def capped_search(spec: str) -> dict:
    """A search under a 300 MiB CPU cap, reported as plain data (run in a fresh process by the fixture below).
    to_oom: these models' samples/s is flat, so the plateau rule would stop them before the cap."""
    model = {HUNGRY: FortyMiBPerSample, STEP: StepHungry}[spec]
    model.seen.clear()
    cfg = BenchConfig(model=spec, input_shape=(1, 3, 4, 4), device="cpu")
    result = find_max_batch(cfg, max_batch=1024, memory_cap_bytes=300 * MiB, to_oom=True, try_warmup=0,
                            try_iters=1, measure_warmup=0, measure_iters=1)
    return {"max_batch": result.max_batch, "seen": sorted(model.seen),
            "tries": [(t.batch, t.fits, t.reason, t.peak_bytes, t.estimated_bytes) for t in result.tries],
            "points": [(p.batch, p.peak_bytes) for p in result.points],
            "first_failure": result.first_failure, "limit_found": result.limit_found,
            "stop_rule": result.stop_rule.value, "best_batch": result.best_batch,
            "samples_per_s": result.samples_per_s,
            "measurement": (result.measurement.batch, result.measurement.fits)}


def capped_searches() -> dict:
    return {"forty": capped_search(HUNGRY), "step": capped_search(STEP)}


@pytest.fixture(scope="module")
def capped() -> dict:
    # A fresh process: peak RSS is process-wide, and threads other tests leave behind (app workers,
    # compile pools) would add their allocations to a try's measured peak.
    code = ("import json; from tests.engine.test_throughput import capped_searches; "
            "print(json.dumps(capped_searches()))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                          cwd=str(Path(__file__).resolve().parents[2]))
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_cpu_memory_cap_refuses_tries_estimated_over_it_without_running_them(capped):
    out = capped["forty"]
    cap = 300 * MiB
    refused = [t for t in out["tries"] if not t[1]]
    assert refused and all("cap" in t[2] and t[4] > cap for t in refused)
    assert all(t[0] not in out["seen"] for t in refused)  # never run
    # 7 x 40 MiB (+ a little) fits under 300 MiB and 8 x 40 MiB does not.
    assert 5 <= out["max_batch"] <= 7, out["tries"]
    assert out["stop_rule"] == "memory-cap" and out["limit_found"]
    assert max(out["seen"]) * 40 * MiB <= cap
    big_batch, big_peak = max(out["points"])
    assert big_peak >= 0.99 * big_batch * 40 * MiB  # measured peak RSS growth


def test_a_try_that_ran_over_the_cap_does_not_count_as_fitting(capped):
    """`--memory-cap 0.2` once said "largest batch 16" for a batch whose run went over the cap, then
    refused to measure it: "throughput n/a", exit 0."""
    out = capped["step"]
    cap = 300 * MiB
    over = [t for t in out["tries"] if not t[1] and "went over" in t[2]]
    # 8 is estimated at 160 MiB from 2 and 4 (20 MiB a sample), runs, and uses 800 MiB.
    assert over and over[0][0] == 8 and over[0][3] > cap and over[0][4] <= cap, out["tries"]
    assert 8 in out["seen"]
    assert all(p[1] <= cap for p in out["points"])  # every batch counted as fitting stayed under the cap
    assert out["max_batch"] == 4 and out["first_failure"] == 5 and out["limit_found"], out["tries"]
    assert out["stop_rule"] == "memory-cap"
    # The result's rate is measured, at a batch that fitted.
    assert out["measurement"] == [out["best_batch"], True] and out["best_batch"] <= 4
    assert out["samples_per_s"] > 0


def test_model_rejecting_the_shape_is_a_shape_error():
    cfg = BenchConfig(model=TINY, input_shape=(1, 5, 8, 8), device="cpu")
    with pytest.raises(ShapeError):
        find_max_batch(cfg, max_batch=4)


def test_cancel_during_the_search_returns_a_cancelled_result():
    calls = []
    cfg = BenchConfig(model=TINY, input_shape=(1, 3, 8, 8), device="cpu")
    result = find_max_batch(cfg, max_batch=64, try_batch=oom_above(10**6, calls),
                            should_cancel=lambda: len(calls) >= 2)
    assert result.cancelled and result.measurement is None and result.max_batch == 2
    assert result.stop_reason == "cancelled while growing, before batch 4"
    assert result.limit_text() == "not searched past 2: cancelled"  # not "stopped by cancelled"


def test_a_cancel_during_the_final_measurement_says_what_had_stopped_the_search():
    calls = []
    cfg = BenchConfig(model=TINY, input_shape=(1, 3, 8, 8), device="cpu")
    result = find_max_batch(cfg, max_batch=4, try_batch=oom_above(10**6, calls),
                            should_cancel=lambda: len(calls) >= 4)  # 1, 2, 4 searched, then 4 measured
    assert result.cancelled and calls == [1, 2, 4, 4]
    assert result.stop_reason == "cancelled during the final measurement (the search had stopped by max-batch)"


# -- CUDA ----------------------------------------------------------------------------------------------


class QuarterGiBPerSample(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        big = torch.empty(x.shape[0], 64 * MiB, device=x.device)  # float32: 256 MiB per sample
        return big[:, :1] + x.flatten(1)[:, :1]


def quarter_gib_per_sample() -> nn.Module:
    return QuarterGiBPerSample()


@pytest.mark.gpu
def test_gpu_real_out_of_memory_and_allocator_back_to_baseline():
    torch.cuda.synchronize()
    gc.collect()
    before = torch.cuda.memory_allocated()
    # Blocks an earlier test left cached count as used here, and the search frees them first (seen on an H100:
    # 313 x 256 MiB fitted, 1.7 MB more than mem_get_info said was free with the cache held).
    torch.cuda.empty_cache()
    free, total = torch.cuda.mem_get_info()
    cfg = BenchConfig(model="tests.engine.test_throughput:quarter_gib_per_sample",
                      input_shape=(1, 3, 4, 4), device="cuda")
    # to_oom: this test is about the real out-of-memory path, which a plateau would stop short of.
    result = find_max_batch(cfg, max_batch=4096, measure_iters=2, to_oom=True)
    assert not result.hit_bound and result.stop_rule is StopRule.OOM
    assert any(not t.fits and "out of memory" in t.reason.lower() for t in result.tries)
    released = before - result.allocator_before_bytes  # the cuBLAS workspaces the search dropped
    assert 0 < result.max_batch * 256 * MiB <= free + released
    assert result.samples_per_s > 0
    assert torch.cuda.memory_allocated() == result.allocator_after_bytes == result.allocator_before_bytes
    # The search starts by dropping cuBLAS workspaces an earlier test may have left: never more than before.
    assert result.allocator_before_bytes <= before
    assert isinstance(result.memory_cap_bytes, NA)


@pytest.mark.gpu
def test_gpu_tiny_model_throughput_rises_with_batch():
    before = torch.cuda.memory_allocated()
    cfg = BenchConfig(model=TINY, input_shape=(1, 3, 32, 32), device="cuda")
    result = find_max_batch(cfg, max_batch=256, measure_iters=20, to_oom=True)
    assert result.max_batch == 256 and result.hit_bound and result.stop_rule is StopRule.MAX_BATCH
    assert result.points[-1].samples_per_s > result.points[0].samples_per_s
    assert all(p.peak_bytes > 0 for p in result.points)
    assert torch.cuda.memory_allocated() == before
