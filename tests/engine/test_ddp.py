"""A DDP training step across ranks (engine/measurements/ddp.py): the exposed communication and the share hidden from
the three parts' times (clamped, and said so), the all-reduce's busbw, the buckets DDP says, the world and the inputs
checked before any rank starts, and ranks that fail or are cancelled: each said in one line naming the rank, and none
left running."""

from __future__ import annotations

import pytest

from tests.engine.rank_processes import ranks_left
from tests.one_line import one_line_error
from torchperf_tui.core.errors import TorchperfError
from torchperf_tui.engine.hardware.lazy_torch import torch
from torchperf_tui.engine.measurements import ddp
from torchperf_tui.engine.measurements.bench_config import BenchConfig
from torchperf_tui.engine.measurements.collectives import bus_factor
from torchperf_tui.engine.measurements.ddp import (DdpResult, DdpSpec, DdpWatch, PartTime, gradient_buckets,
                                                   resolve_ddp, run_ddp, world_size)
from torchperf_tui.engine.measurements.ranks import RankFailed

GiB = 1024**3
TINY_RUN = BenchConfig("tests.tinymodels:tiny_cnn", input_shape=(4, 3, 16, 16), step="train", iters=2, warmup=0)
TINY = DdpSpec(run=TINY_RUN, world=2, device="cpu")


def result_of(compute: float, step: float, allreduce: float, world: int = 2, gradient_bytes: int = 4096):
    parts = {"compute": PartTime(compute, [compute] * world), "ddp": PartTime(step, [step] * world),
             "allreduce": PartTime(allreduce, [allreduce] * world)}
    return DdpResult(spec=DdpSpec(run=TINY_RUN, world=world, device="cpu"), backend="gloo", devices=["cpu"] * world,
                     threads=1, gradient_bytes=gradient_bytes, buckets=[gradient_bytes], parts=parts)


def test_exposed_is_the_ddp_step_over_the_compute_alone_and_hidden_its_share_of_the_all_reduce_alone():
    result = result_of(compute=0.100, step=0.110, allreduce=0.040, world=4)
    assert result.exposed_s == pytest.approx(0.010)
    assert result.hidden == result.hidden_unclamped == pytest.approx(1 - 0.010 / 0.040)
    assert result.algbw_gbs == 4096 / 0.040 / 1e9
    assert result.busbw_gbs == result.algbw_gbs * bus_factor("all_reduce", 4)


@pytest.mark.parametrize("step, raw, hidden", [
    (0.150, 1 - 0.050 / 0.040, 0.0),  # DDP added more than its all-reduce alone takes
    (0.095, 1 + 0.005 / 0.040, 1.0),  # the DDP step quicker than the compute alone: noise
])
def test_a_share_outside_zero_to_one_is_clamped_and_keeps_its_measured_value(step, raw, hidden):
    result = result_of(compute=0.100, step=step, allreduce=0.040)
    assert result.hidden_unclamped == pytest.approx(raw) and result.hidden == hidden
    data = result.to_dict()
    assert (data["hidden"], data["hidden_unclamped"]) == (hidden, result.hidden_unclamped)
    assert data["exposed_s"] == result.exposed_s and data["ddp_s"] == step


def test_a_cancelled_run_says_nothing_it_did_not_time():
    result = result_of(0.1, 0.1, 0.1)
    result.parts = {"compute": result.parts["compute"]}
    assert result.exposed_s is None and result.hidden is None and result.busbw_gbs is None


def test_one_rank_is_refused_in_words_that_say_why():
    line = one_line_error(TorchperfError, world_size, "1")
    assert "DDP needs 2 ranks or more" in line and "bench MODEL --step train" in line


# -- the parent's side, fed by hand ----------------------------------------------------------------------------

def test_a_parts_time_is_the_slowest_ranks_median_once_every_rank_has_sent_its_own():
    watch = DdpWatch(2, None, now=0.0)
    watch.hear(("median", 0, "ddp", 0.2), 1.0)
    assert watch.parts == {}
    watch.hear(("median", 1, "ddp", 0.3), 1.0)
    assert watch.parts == {"ddp": PartTime(0.3, [0.2, 0.3])}
    watch.hear(("facts", 0, {"gradient_bytes": 8}), 1.0)
    assert watch.facts == {"gradient_bytes": 8}


def test_a_rank_that_fails_is_named_with_what_it_was_doing():
    watch = DdpWatch(2, None, now=0.0)
    watch.hear(("ready", 1), 1.0)
    watch.hear(("begin", 1, "timed"), 1.0)
    with pytest.raises(RankFailed) as info:
        watch.hear(("failed", 1, "OutOfMemory: out of memory running resnet18"), 2.0)
    assert str(info.value) == "rank 1 failed during the timed rounds: OutOfMemory: out of memory running resnet18"


# -- the buckets DDP says -----------------------------------------------------------------------------------------

class Wrapped:
    """DDP as gradient_buckets reads it: the module it wraps and its logging data."""

    def __init__(self, data) -> None:
        self.module = torch.nn.Linear(10, 10)  # 110 parameters: 440 bytes of float32 gradient
        self.data = data

    def _get_ddp_logging_data(self):
        if isinstance(self.data, Exception):
            raise self.data
        return self.data


@pytest.mark.parametrize("data, sizes, from_ddp", [
    ({"bucket_sizes": "440", "rebuilt_bucket_sizes": "40, 400", "bucket_cap_bytes": 1024}, [40, 400], True),
    ({"bucket_sizes": "440", "bucket_cap_bytes": 1024}, [440], True),  # not rebuilt (yet): the first assignment
    ({"rebuilt_bucket_sizes": "40, 40"}, [440], False),  # not every gradient: one all-reduce of them all
    ({}, [440], False),
    (RuntimeError("no logger"), [440], False),
])
def test_the_all_reduce_alone_runs_the_buckets_ddp_says_else_one_of_every_gradient(data, sizes, from_ddp):
    got, said, grads, _ = gradient_buckets(Wrapped(data))
    assert (got, said, grads.dtype) == (sizes, from_ddp, torch.float32)


# -- checked before any rank starts -------------------------------------------------------------------------------

def test_inputs_past_the_memory_are_refused_before_a_rank_starts(monkeypatch):
    monkeypatch.setattr(ddp.psutil, "virtual_memory", lambda: type("Memory", (), {"available": GiB})())
    spec = DdpSpec(run=BenchConfig("resnet18", input_shape=(2000, 3, 224, 224), step="train"), world=2,
                   device="cpu")
    line = one_line_error(TorchperfError, resolve_ddp, spec)
    assert line.startswith("--batch 2000 across 2 ranks: their inputs alone need about 2.2 GiB (each rank its own "
                           "batch), more than half of the 1.0 GiB available")


def test_a_model_that_is_not_there_is_refused_before_a_rank_starts():
    spec = DdpSpec(run=BenchConfig("nosuchmodel", step="train"), world=2, device="cpu")
    assert "unknown model 'nosuchmodel'" in one_line_error(TorchperfError, resolve_ddp, spec)


def test_a_cuda_world_past_the_gpus_is_refused_and_auto_on_one_gpu_runs_on_the_cpu_saying_why(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    assert "this box has 1 GPU: the DDP steps across GPUs need two or more" in one_line_error(
        TorchperfError, resolve_ddp, DdpSpec(run=TINY_RUN, device="cuda"))
    notes: list = []
    resolved, _ = resolve_ddp(DdpSpec(run=TINY_RUN), notes)
    assert (resolved.device, resolved.world, resolved.backend, resolved.run.device) == ("cpu", 2, "gloo", "cpu")
    assert notes and notes[0].startswith("one GPU here: the DDP steps run across processes on the CPU")


# -- ranks started for real (gloo, two processes, a tiny model) ---------------------------------------------------

def test_a_model_that_fails_to_build_on_one_rank_names_it_in_one_line_and_no_rank_is_left():
    spec = DdpSpec(run=BenchConfig("tests.engine.ddp_models:fails_on_rank_1", input_shape=(4, 3, 16, 16),
                                   step="train", iters=2, warmup=0), world=2, device="cpu")
    line = one_line_error(RankFailed, run_ddp, spec)
    assert line.startswith("rank 1 failed while building the model: ") and "planted build failure" in line
    assert ranks_left() == []


def test_a_cancel_stops_the_ranks_at_once():
    result = run_ddp(TINY, should_cancel=lambda: True)
    assert result.cancelled and result.parts == {} and result.exposed_s is None
    assert ranks_left() == []


@pytest.mark.gpu
def test_two_gpus_run_a_ddp_step_with_nccl():
    if torch.cuda.device_count() < 2:
        pytest.skip("needs two GPUs")
    result = run_ddp(DdpSpec(run=TINY_RUN, world=2, device="cuda"))
    assert result.backend == "nccl" and set(result.parts) == set(ddp.PARTS)
    assert result.gradient_bytes == sum(result.buckets) > 0 and 0 <= result.hidden <= 1
    assert ranks_left() == []
