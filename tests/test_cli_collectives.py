"""`torchperf-tui collectives`: two ranks with gloo on this CPU give nccl-tests' busbw at every size (its --json),
the table says each collective's factor, the link's peak and a bar per size, and bad input is one line with exit 2
before any rank (or job) starts."""

from __future__ import annotations

import json

import pytest

from tests.cli_run import no_job_sent, run
from torchperf_tui.cli import common
from torchperf_tui.cli.collectives import render_collectives
from torchperf_tui.engine.hardware.nvml import NA
from torchperf_tui.engine.measurements.collectives import (CollectivesResult, CollectivesSpec, PEAK_NA_CPU,
                                                           make_point)


def test_two_gloo_ranks_give_busbw_as_nccl_tests_defines_it_at_every_size(capsys):
    code, out, err = run(capsys, "collectives", "--world", "2", "--device", "cpu", "--sizes", "1K-16K", "--iters", "3",
                         "--warmup", "1", "--json")
    assert code == 0, err
    data = json.loads(out)
    n = data["world"]
    assert (n, data["device"], data["backend"]) == (2, "cpu", "gloo")
    assert data["peak_gbs"] == f"n/a ({PEAK_NA_CPU})"
    factors = {"all_reduce": 2 * (n - 1) / n, "all_gather": (n - 1) / n, "reduce_scatter": (n - 1) / n}
    for op, factor in factors.items():
        points = [p for p in data["points"] if p["op"] == op]
        assert [p["size_bytes"] for p in points] == [1024, 4096, 16384], op
        for p in points:
            assert p["time_s"] > 0 and p["time_s"] == max(p["rank_medians_s"]) and len(p["rank_medians_s"]) == n
            assert p["algbw_gbs"] == p["size_bytes"] / p["time_s"] / 1e9
            assert p["busbw_gbs"] == p["algbw_gbs"] * factor, (op, p)
    assert data["skipped"] == {} and data["cancelled"] is False


def test_the_table_says_each_collectives_factor_the_peak_and_a_bar_per_size(capsys):
    spec = CollectivesSpec(world=4, device="cpu", ops=("all_reduce", "all_gather"), sizes=(1024, 4096))
    points = [make_point("all_reduce", 1024, [1e-4] * 4, None), make_point("all_reduce", 4096, [2e-4] * 4, None),
              make_point("all_gather", 4096, [1e-4] * 4, None)]
    render_collectives(CollectivesResult(spec=spec, backend="gloo", devices=["cpu"] * 4, peak_gbs=NA(PEAK_NA_CPU),
                                         peak_source="", points=points, seconds=3.0))
    out = capsys.readouterr().out
    words = " ".join(out.split())
    assert "all_reduce, all_gather across 4 ranks on the CPU (gloo), float32, 1.0 KiB-4.0 KiB" in words
    assert "link's peak n/a: on the CPU the ranks exchange data" in words
    assert "all_reduce: busbw = algbw x 2(n-1)/n = algbw x 1.50 across 4 ranks" in out
    assert "all_gather: busbw = algbw x (n-1)/n = algbw x 0.75 across 4 ranks" in out
    rows = {line.split()[0] + line.split()[1]: line for line in out.splitlines() if "KiB" in line and "µs" in line}
    assert rows["4.0KiB"].rstrip().endswith("█" * 20)  # the largest busbw of the run is a full bar
    assert "bars: busbw against the largest of the run" in out


@pytest.mark.parametrize("args, words", [
    (["--world", "0"], "a collective needs 2 ranks or more"),
    (["--world", "1"], "busbw's factor (n-1)/n is 0"),
    (["--world", "100000"], "ranks here (4 per logical CPU"),
    (["--world", "x"], "expected a whole number"),
    (["--sizes", "lots"], "--sizes 'lots': write a size as a whole number with B, K, M or G"),
    (["--sizes", "64M-1K"], "MIN (64.0 MiB) is above MAX (1.0 KiB)"),
    (["--sizes", "1K-1T"], "write a size"),
    (["--ops", "all_reduce,alltoall"], "unknown collective 'alltoall'"),
    (["--iters", "0"], "--iters"),
    (["--warmup", "-1"], "--warmup"),
    (["--device", "tpu"], "unknown device 'tpu'"),
    (["--device", "cuda:1"], "invalid choice: 'cuda:1'"),
])
def test_bad_input_is_one_line_and_exit_2_before_any_job(capsys, monkeypatch, args, words):
    sent = no_job_sent(monkeypatch, common, "the arguments were checked")
    code, out, err = run(capsys, "collectives", *args)
    assert code == 2 and out == "" and sent == []
    assert len(err.strip().splitlines()) == 1 and words in err, err
