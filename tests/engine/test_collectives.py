"""Collectives across processes (engine/measurements/collectives.py): nccl-tests' algbw and busbw, the sizes and
collectives a user types, the world checked against the box, and ranks that fail, stall or are cancelled: each said in
one line naming the rank, and none left running."""

from __future__ import annotations

import functools
import time

import psutil
import pytest

from tests.engine.collective_bodies import failing_rank, stalling_rank
from tests.engine.rank_processes import ranks_left
from tests.one_line import one_line_error
from torchperf_tui.core.errors import TorchperfError
from torchperf_tui.engine.measurements import collectives
from torchperf_tui.engine.measurements.collectives import (CollectivesSpec, Gathering, bus_factor, message_sizes,
                                                           parse_ops, parse_sizes, resolve_spec, run_collectives,
                                                           sized_for, world_size)
from torchperf_tui.engine.measurements.ranks import RankFailed
from torchperf_tui.engine.hardware.lazy_torch import torch

KiB, MiB, GiB = 1024, 1024**2, 1024**3


def test_bus_factors_are_nccl_tests():
    assert [bus_factor("all_reduce", n) for n in (2, 4, 8)] == [1.0, 1.5, 1.75]
    assert [bus_factor("all_gather", n) for n in (2, 8)] == [0.5, 0.875]
    assert bus_factor("reduce_scatter", 4) == 0.75


def test_sizes_step_by_four_from_min_to_max_with_max_last():
    assert parse_sizes("1K-64M") == (KiB, 64 * MiB)
    assert parse_sizes(" 8kib - 1 MiB ") == (8 * KiB, MiB)
    assert parse_sizes("4096") == (4096, 4096)
    assert message_sizes(KiB, 64 * MiB) == [KiB * 4**i for i in range(9)]
    assert message_sizes(KiB, 10 * KiB) == [KiB, 4 * KiB, 10 * KiB]


def test_a_size_is_whole_elements_in_every_ranks_share():
    assert sized_for(1024, 2) == 1024
    assert sized_for(1024, 3) == 1020  # 85 float32 per rank
    assert sized_for(1, 8) == 32  # one element per rank at least


@pytest.mark.parametrize("text, words", [
    ("x", "write a size as a whole number with B, K, M or G"),
    ("1T-2T", "write a size"),
    ("64M-1K", "MIN (64.0 MiB) is above MAX (1.0 KiB)"),
    ("0", "at least 1 byte"),
    ("16G", "at most 8.0 GiB per message"),
    ("-5", "write a size"),
    ("", "write a size"),
])
def test_sizes_that_are_not_sizes_are_one_line(text, words):
    assert words in one_line_error(TorchperfError, parse_sizes, text)


def test_collectives_are_named_as_typed_once_each_in_order():
    assert parse_ops("reduce-scatter,allreduce,all_reduce") == ("reduce_scatter", "all_reduce")
    assert "unknown collective 'broadcast'" in one_line_error(TorchperfError, parse_ops, "all_reduce,broadcast")


@pytest.mark.parametrize("value, words", [
    ("0", "a collective needs 2 ranks or more"),
    ("1", "busbw's factor (n-1)/n is 0"),
    ("99999", "ranks here (4 per logical CPU"),
    ("two", "expected a whole number"),
])
def test_a_world_that_cannot_run_is_one_line(value, words):
    assert words in one_line_error(TorchperfError, world_size, value)


# -- the parent's side, fed by hand ----------------------------------------------------------------------------

def fed(world: int = 2, peak: float | None = None):
    points: list = []
    spec = CollectivesSpec(world=world, device="cpu", sizes=(KiB, 4 * KiB))
    return Gathering(spec, peak, points.append, lambda *a: None, now=0.0), points


def test_a_point_is_made_once_every_rank_has_sent_its_median_and_its_time_is_the_slowest():
    gathering, points = fed(peak=2.0)
    gathering.hear(("median", 0, "all_reduce", 1000, 1e-3), 1.0)
    assert points == []
    gathering.hear(("median", 1, "all_reduce", 1000, 4e-3), 1.0)
    [point] = points
    assert point.time_s == 4e-3 and point.rank_medians_s == [1e-3, 4e-3]
    assert point.algbw_gbs == 1000 / 4e-3 / 1e9
    assert point.busbw_gbs == point.algbw_gbs * (2 * (2 - 1) / 2)
    assert point.peak_pct == point.busbw_gbs / 2.0 * 100


def test_a_rank_that_fails_is_named_with_where_it_was_and_why():
    gathering, _ = fed()
    gathering.hear(("ready", 1), 1.0)
    gathering.hear(("begin", 1, "all_gather", 4 * MiB), 1.0)
    with pytest.raises(RankFailed) as info:
        gathering.hear(("failed", 1, "RuntimeError: out of memory"), 2.0)
    assert str(info.value) == "rank 1 failed during all_gather of 4.0 MiB: RuntimeError: out of memory"
    assert gathering.died_line(0, -9) == "rank 0 was killed (SIGKILL) while joining the group"


def test_silence_names_the_ranks_the_others_wait_for_once_all_are_silent_past_the_deadline():
    gathering, _ = fed(world=3)
    for rank in range(3):
        gathering.hear(("ready", rank), 0.0)
    gathering.hear(("begin", 0, "all_reduce", KiB), 5.0)
    gathering.hear(("begin", 2, "all_reduce", KiB), 5.0)
    assert gathering.silent_line(now=10.0, start_s=60, silence_s=10) is None  # ranks 0 and 2 spoke 5 s ago
    line = gathering.silent_line(now=15.0, start_s=60, silence_s=10)
    assert line.startswith("rank 1 said nothing for 10 s after joining the group: stopped the 3 ranks")


def test_ranks_that_never_join_are_said_past_the_start_deadline():
    gathering, _ = fed()
    assert gathering.silent_line(now=5.0, start_s=6, silence_s=1) is None  # the start's deadline, not the pass's
    assert gathering.silent_line(now=6.0, start_s=6, silence_s=1).startswith(
        "ranks 0, 1 did not join the group within 6 s")


# -- the device and the world, checked against the box (no rank started) ----------------------------------------

def pretend_gpus(monkeypatch, count: int) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: count > 0)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: count)


def test_a_cuda_world_past_the_gpus_is_refused(monkeypatch):
    pretend_gpus(monkeypatch, 2)
    line = one_line_error(TorchperfError, resolve_spec, CollectivesSpec(world=4, device="cuda"))
    assert line == ("--world 4: this box has 2 GPU(s) that torch sees, and NCCL runs one rank per GPU (give --world "
                    "2, or --device cpu)")


def test_one_gpu_is_no_cuda_world_and_auto_runs_on_the_cpu_saying_why(monkeypatch):
    pretend_gpus(monkeypatch, 1)
    assert "this box has 1 GPU" in one_line_error(TorchperfError, resolve_spec, CollectivesSpec(device="cuda"))
    notes: list = []
    resolved = resolve_spec(CollectivesSpec(), notes)
    assert (resolved.device, resolved.world, resolved.backend) == ("cpu", 2, "gloo")
    assert notes and "one GPU here" in notes[0]
    pretend_gpus(monkeypatch, 0)
    assert "torch sees no CUDA device" in one_line_error(TorchperfError, resolve_spec, CollectivesSpec(device="cuda"))


def test_buffers_past_the_memory_are_refused_before_a_rank_starts(monkeypatch):
    monkeypatch.setattr(collectives.psutil, "virtual_memory", lambda: type("Memory", (), {"available": GiB})())
    line = one_line_error(TorchperfError, resolve_spec, CollectivesSpec(world=2, device="cpu", sizes=(KiB, GiB)))
    assert line.startswith("--sizes up to 1.0 GiB across 2 ranks needs about 3.0 GiB of buffers")


# -- ranks started for real (gloo, two processes, tiny sizes) ---------------------------------------------------

TINY = CollectivesSpec(world=2, device="cpu", ops=("all_reduce",), sizes=(KiB, 4 * KiB), iters=2, warmup=0)


def test_a_rank_that_raises_is_said_in_one_line_and_no_rank_is_left():
    began = time.monotonic()
    line = one_line_error(RankFailed, functools.partial(run_collectives, body=failing_rank), TINY)
    assert line == "rank 1 failed while joining the group: RuntimeError: planted failure"
    assert time.monotonic() - began < 60  # rank 0 waited for it in the group: killed, not waited out
    assert ranks_left() == []


def test_a_rank_that_stalls_is_stopped_past_the_silence_and_named():
    line = one_line_error(RankFailed, functools.partial(run_collectives, body=stalling_rank, silence_s=2.0),
                          TINY)
    assert line.startswith("rank 1 said nothing for 2 s after joining the group: stopped the 2 ranks")
    assert ranks_left() == []


def test_a_cancel_stops_the_ranks_and_keeps_the_points_so_far():
    seen: list = []
    result = run_collectives(TINY, on_point=seen.append, should_cancel=lambda: bool(seen))
    assert result.cancelled and result.points == seen and len(seen) >= 1
    assert ranks_left() == []


@pytest.mark.gpu
def test_two_gpus_run_every_collective_with_nccl():
    if torch.cuda.device_count() < 2:
        pytest.skip("needs two GPUs")
    result = run_collectives(CollectivesSpec(world=2, device="cuda", sizes=(KiB, MiB), iters=3, warmup=1))
    assert result.backend == "nccl" and result.skipped == {}
    assert {p.op for p in result.points} == set(collectives.OPS)
    assert all(p.time_s > 0 and p.busbw_gbs == p.algbw_gbs * bus_factor(p.op, 2) for p in result.points)
    assert ranks_left() == []
