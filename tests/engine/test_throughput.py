import gc
import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from torch import nn

from torchperf_tui.engine.errors import ShapeError
from torchperf_tui.engine.nvml import NA, Nvml
from torchperf_tui.engine.telemetry import release_memory
from torchperf_tui.engine.throughput import (BatchTry, MemoryCapExceeded, find_max_batch, is_out_of_memory,
                                             search_max_batch)
from torchperf_tui.engine.timing import BenchConfig
from tests.fakes.fake_cuda import h100_fakes
from tests.fakes.fake_nvml import MiB

TINY = "tests.tinymodels:tiny_cnn"
CAPPED = "tests.engine.test_throughput:cnn_oom_above_12"
HUNGRY = "tests.engine.test_throughput:forty_mib_per_sample"


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


def oom_above(limit: int, calls: list[int] | None = None):
    def try_batch(batch: int, warmup: int, iters: int):
        if calls is not None:
            calls.append(batch)
        if batch > limit:
            raise torch.OutOfMemoryError(f"CUDA out of memory at batch {batch}")
        return [1.0 + batch / 100] * iters
    return try_batch


# -- the search ----------------------------------------------------------------------------------------


def test_grows_geometrically_then_bisects_to_the_exact_limit():
    calls: list[int] = []
    progress: list[BatchTry] = []
    out = search_max_batch(oom_above(12, calls), max_batch=1024, on_progress=progress.append)
    assert out.max_batch == 12
    assert calls == [1, 2, 4, 8, 16, 12, 14, 13]
    assert [t.phase for t in out.tries] == ["grow"] * 5 + ["bisect"] * 3
    assert [t.fits for t in out.tries] == [True, True, True, True, False, True, False, False]
    assert "out of memory at batch 16" in out.tries[4].reason
    assert progress == out.tries
    assert not out.hit_bound and not out.cancelled


@pytest.mark.parametrize("limit", [1, 2, 3, 5, 37, 100, 511, 1000])
def test_finds_any_limit(limit):
    assert search_max_batch(oom_above(limit), max_batch=1024).max_batch == limit


def test_max_batch_bound_stops_growth_and_is_reported():
    calls: list[int] = []
    out = search_max_batch(oom_above(10**9, calls), max_batch=100)
    assert calls == [1, 2, 4, 8, 16, 32, 64, 100]
    assert out.max_batch == 100 and out.hit_bound


def test_batch_one_not_fitting_gives_zero():
    out = search_max_batch(oom_above(0), max_batch=64)
    assert out.max_batch == 0 and len(out.tries) == 1 and not out.tries[0].fits


def test_resolution_trades_exactness_for_fewer_tries():
    calls: list[int] = []
    out = search_max_batch(oom_above(700, calls), max_batch=4096, resolution=64)
    assert 700 - 64 <= out.max_batch <= 700
    assert len(calls) < len(search_max_batch(oom_above(700), max_batch=4096).tries)


def test_errors_other_than_out_of_memory_propagate():
    def broken(batch, warmup, iters):
        raise ValueError("mat1 and mat2 shapes cannot be multiplied")
    with pytest.raises(ValueError):
        search_max_batch(broken)


def test_allocation_failures_that_surface_as_runtime_errors_count_as_out_of_memory():
    assert is_out_of_memory(torch.OutOfMemoryError("x"))
    assert is_out_of_memory(MemoryCapExceeded("over the cap"))
    assert is_out_of_memory(RuntimeError("DefaultCPUAllocator: can't allocate memory: you tried..."))
    assert is_out_of_memory(RuntimeError("cuDNN error: CUDNN_STATUS_ALLOC_FAILED"))
    assert not is_out_of_memory(RuntimeError("Given groups=1, weight of size [8, 3, 3, 3]"))


def test_cancel_between_tries_keeps_what_was_found():
    calls: list[int] = []
    out = search_max_batch(oom_above(10**6, calls), max_batch=1024, should_cancel=lambda: len(calls) >= 3)
    assert out.cancelled and calls == [1, 2, 4] and out.max_batch == 4


def test_release_runs_after_each_failed_try_and_once_at_the_end():
    released: list[int] = []
    calls: list[int] = []
    search_max_batch(oom_above(5, calls), max_batch=64, release=lambda: released.append(len(calls)))
    assert calls == [1, 2, 4, 8, 6, 5]
    assert released == [4, 5, 6]  # after 8 and 6 failed, then at the end


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
    result = find_max_batch(cfg, max_batch=64, measure_iters=4, on_progress=seen.append)
    assert result.max_batch == 12 and not result.hit_bound and not result.cancelled
    assert [t.batch for t in result.points] == [1, 2, 4, 8, 12]
    assert all(p.samples_per_s > 0 and p.latency_ms > 0 for p in result.points)
    assert result.measurement.batch == 12 and result.measurement.iters == 4
    assert result.samples_per_s == result.measurement.samples_per_s > 0
    assert seen[-1] is result.measurement and seen[:-1] == result.tries
    assert isinstance(result.allocator_before_bytes, NA) and result.memory_cap_bytes > 0
    assert result.sample_shape == (3, 8, 8)
    data = result.to_dict()
    assert data["max_batch"] == 12 and len(data["points"]) == 5
    assert data["allocator_before_bytes"].startswith("n/a")


def test_samples_per_second_is_batches_times_batch_over_total_time():
    def try_batch(batch, warmup, iters):
        if batch > 8:
            raise torch.OutOfMemoryError("no")
        return [10.0, 10.0, 20.0][:iters] if iters <= 3 else [10.0] * (iters - 1) + [30.0]

    cfg = BenchConfig(model=TINY, input_shape=(1, 3, 8, 8), device="cpu")
    result = find_max_batch(cfg, max_batch=64, try_iters=3, measure_iters=5, try_batch=try_batch)
    assert result.max_batch == 8
    assert result.points[0].samples_per_s == pytest.approx(3 * 1 / 0.040)
    assert result.points[0].latency_ms == 10.0
    assert result.samples_per_s == pytest.approx(5 * 8 / 0.070)  # 4 x 10 ms + 30 ms


def cap_search_outcome() -> dict:
    """The capped search, reported as plain data (run in a fresh process by the test below)."""
    FortyMiBPerSample.seen.clear()
    cfg = BenchConfig(model=HUNGRY, input_shape=(1, 3, 4, 4), device="cpu")
    result = find_max_batch(cfg, max_batch=1024, memory_cap_bytes=300 * MiB, try_warmup=0, try_iters=1,
                            measure_warmup=0, measure_iters=1)
    return {"max_batch": result.max_batch, "seen": sorted(FortyMiBPerSample.seen),
            "tries": [(t.batch, t.fits, t.reason, t.peak_bytes, t.estimated_bytes) for t in result.tries],
            "points": [(p.batch, p.peak_bytes) for p in result.points]}


def test_cpu_memory_cap_refuses_tries_estimated_over_it_without_running_them():
    # A fresh process: peak RSS is process-wide, and threads other tests leave behind (app workers,
    # compile pools) would add their allocations to a try's measured peak.
    code = ("import json; from tests.engine.test_throughput import cap_search_outcome; "
            "print(json.dumps(cap_search_outcome()))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                          cwd=str(Path(__file__).resolve().parents[2]))
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    cap = 300 * MiB
    refused = [t for t in out["tries"] if not t[1]]
    assert refused and all("cap" in t[2] and t[4] > cap for t in refused)
    assert all(t[0] not in out["seen"] for t in refused)  # never run
    # 7 x 40 MiB (+ a little) fits under 300 MiB and 8 x 40 MiB does not.
    assert 5 <= out["max_batch"] <= 7, out["tries"]
    assert max(out["seen"]) * 40 * MiB <= cap
    big_batch, big_peak = max(out["points"])
    assert big_peak >= 0.99 * big_batch * 40 * MiB  # measured peak RSS growth


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
    free, total = torch.cuda.mem_get_info()
    cfg = BenchConfig(model="tests.engine.test_throughput:quarter_gib_per_sample",
                      input_shape=(1, 3, 4, 4), device="cuda")
    result = find_max_batch(cfg, max_batch=4096, measure_iters=2)
    assert not result.hit_bound
    assert any(not t.fits and "out of memory" in t.reason.lower() for t in result.tries)
    assert 0 < result.max_batch * 256 * MiB <= free
    assert result.samples_per_s > 0
    assert torch.cuda.memory_allocated() == result.allocator_after_bytes == result.allocator_before_bytes
    # The search starts by dropping cuBLAS workspaces an earlier test may have left: never more than before.
    assert result.allocator_before_bytes <= before
    assert isinstance(result.memory_cap_bytes, NA)


@pytest.mark.gpu
def test_gpu_tiny_model_throughput_rises_with_batch():
    before = torch.cuda.memory_allocated()
    cfg = BenchConfig(model=TINY, input_shape=(1, 3, 32, 32), device="cuda")
    result = find_max_batch(cfg, max_batch=256, measure_iters=20)
    assert result.max_batch == 256 and result.hit_bound
    assert result.points[-1].samples_per_s > result.points[0].samples_per_s
    assert all(p.peak_bytes > 0 for p in result.points)
    assert torch.cuda.memory_allocated() == before
