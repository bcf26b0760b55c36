"""`torchperf-tui ddp`: two ranks with gloo on this CPU time the DDP step, its compute alone and its buckets'
all-reduce alone, and the --json's exposed, hidden and busbw follow from them; the words say each part, the clamp
and busbw's factor; bad input is one line with exit 2 before any rank (or job) starts."""

from __future__ import annotations

import json

import pytest

from tests.cli_run import no_job_sent, run
from torchperf_tui.cli import common
from torchperf_tui.cli.ddp import render_ddp
from torchperf_tui.engine.measurements.bench_config import BenchConfig
from torchperf_tui.engine.measurements.ddp import DdpResult, DdpSpec, PartTime


def test_two_gloo_ranks_time_the_three_parts_and_the_communication_follows_from_them(capsys):
    code, out, err = run(capsys, "ddp", "tests.tinymodels:tiny_cnn", "--input", "4x3x16x16", "--world", "2",
                         "--device", "cpu", "--iters", "3", "--warmup", "1", "--json")
    assert code == 0, err
    data = json.loads(out)
    assert (data["spec"]["world"], data["spec"]["device"], data["backend"]) == (2, "cpu", "gloo")
    assert data["spec"]["step"] == "train" and data["inputs"] == "4x3x16x16" and data["cancelled"] is False
    parts = data["parts"]
    for part in ("compute", "ddp", "allreduce"):
        medians = parts[part]["rank_medians_s"]
        assert len(medians) == 2 and min(medians) > 0 and parts[part]["time_s"] == max(medians), part
        assert data[f"{part}_s"] == parts[part]["time_s"]
    tiny_cnn_params = 3 * 8 * 9 + 8 + 8 + 8 + 8 * 10 + 10  # conv, its bias, batch norm's weight and bias, fc
    assert data["parameters"] == tiny_cnn_params and data["gradient_bytes"] == tiny_cnn_params * 4
    assert sum(data["buckets"]) == data["gradient_bytes"] and data["buckets_from_ddp"] is True
    assert data["exposed_s"] == data["ddp_s"] - data["compute_s"]
    assert data["hidden_unclamped"] == 1 - data["exposed_s"] / data["allreduce_s"]
    assert data["hidden"] == min(1.0, max(0.0, data["hidden_unclamped"]))
    assert data["busbw_gbs"] == data["algbw_gbs"] == data["gradient_bytes"] / data["allreduce_s"] / 1e9  # 2(n-1)/n: 1


def result_of(compute: float, step: float, allreduce: float, *, from_ddp: bool = True) -> DdpResult:
    run = BenchConfig("resnet18", input_shape=(8, 3, 64, 64), step="train", iters=20, warmup=5)
    parts = {"compute": PartTime(compute, [compute * 0.9, compute]), "ddp": PartTime(step, [step, step]),
             "allreduce": PartTime(allreduce, [allreduce, allreduce])}
    return DdpResult(spec=DdpSpec(run=run, world=2, device="cpu"), backend="gloo", devices=["cpu", "cpu"], threads=1,
                     inputs="8x3x64x64", loss="cross-entropy against seeded random labels", parameters=11689512,
                     gradient_bytes=46758048, gradient_dtype="float32",
                     buckets=[2052000, 28852224, 15853824] if from_ddp else [46758048], buckets_from_ddp=from_ddp,
                     bucket_cap_bytes=26214400, parts=parts, seconds=12.0, torch_version="2.x")


def words_of(capsys, result) -> str:
    render_ddp(result)
    return " ".join(capsys.readouterr().out.split())


def test_the_words_say_each_part_the_exposed_communication_the_share_hidden_and_busbw(capsys):
    words = words_of(capsys, result_of(compute=0.200, step=0.210, allreduce=0.040))
    assert "DDP training step of resnet18 across 2 ranks on the CPU (gloo): 8x3x64x64 per rank, float32" in words
    assert ("11.7 M parameters, 44.6 MiB of float32 gradients in 3 buckets of 2.0 MiB, 27.5 MiB, 15.1 MiB (DDP's "
            "cap 25.0 MiB)") in words
    assert "compute alone 200 ms 180 ms, 200 ms the step on the model without DDP" in words
    assert "DDP step 210 ms 210 ms, 210 ms the step through DDP" in words
    assert "all-reduce alone 40.00 ms 40.00 ms, 40.00 ms DDP's buckets all-reduced back to back" in words
    assert "exposed 10.00 ms, 5 % of the DDP step (DDP step - compute alone" in words
    assert "hidden 75 % of the all-reduce alone as 1 - exposed / all-reduce alone" in words
    assert "busbw = algbw x 2(n-1)/n = x 1.00 across 2 ranks" in words


@pytest.mark.parametrize("step, words", [
    (0.260, "hidden 0 % of the all-reduce alone; clamped from -50 %: DDP added more than its all-reduce alone takes"),
    (0.190, "hidden 100 % of the all-reduce alone; clamped from 125 %: the DDP step was quicker than the compute"),
])
def test_a_share_outside_zero_to_one_is_said_clamped_with_its_measured_value(capsys, step, words):
    assert words in words_of(capsys, result_of(compute=0.200, step=step, allreduce=0.040))


def test_buckets_ddp_did_not_say_are_said_as_one_all_reduce_of_every_gradient(capsys):
    words = words_of(capsys, result_of(0.2, 0.21, 0.04, from_ddp=False))
    assert "DDP did not say its buckets: the all-reduce alone is one of every gradient" in words


@pytest.mark.parametrize("args, words", [
    (["--world", "0"], "DDP needs 2 ranks or more"),
    (["--world", "1"], "no other rank to all-reduce the gradients with"),
    (["--world", "100000"], "ranks here (4 per logical CPU"),
    (["--world", "two"], "expected a whole number"),
    (["--bucket-mb", "0"], "--bucket-mb: must be > 0"),
    (["--bucket-mb", "inf"], "expected a finite number"),
    (["--iters", "0"], "--iters"),
    (["--warmup", "-1"], "--warmup"),
    (["--batch", "0"], "--batch"),
    (["--input", "4x0x16"], "has a dimension <= 0"),
    (["--optimizer", "lbfgs"], "unknown optimizer 'lbfgs'"),
    (["--amp", "fp8"], "--amp"),
    (["--device", "cuda:1"], "invalid choice: 'cuda:1'"),
])
def test_bad_input_is_one_line_and_exit_2_before_any_job(capsys, monkeypatch, args, words):
    sent = no_job_sent(monkeypatch, common, "the arguments were checked")
    code, out, err = run(capsys, "ddp", "tests.tinymodels:tiny_cnn", *args)
    assert code == 2 and out == "" and sent == []
    assert len(err.strip().splitlines()) == 1 and words in err, err
