"""Measured ceilings (issue 14 §3, issue 21 §6): per dtype the best of several matmuls and convolutions (and thread
counts on the CPU), and a large copy, kept per device fingerprint in the user data directory, measured again on
request; the roofline gives MFU against them, and on the CPU they stand in for the datasheet peaks the OS cannot
report. A utilisation above a ceiling is never shown as a fact."""

from __future__ import annotations

import json

import pytest
import torch

from tests.test_cli import run
from torchperf_tui.engine.measurements.ceiling_measurement import measure_ceilings, runs_float8
from torchperf_tui.engine.hardware.ceilings import (FORMAT, OUTDATED, Ceiling, CeilingsResult, device_key,
                                                    load_ceilings, save_ceilings)
from torchperf_tui.engine.measurements.ceiling_measurement import ceilings
from torchperf_tui.core.errors import TorchperfError
from torchperf_tui.engine.analysis.roofline import REMEASURE, peaks_for

SMALL = dict(matmul_sizes=(32, 64), matmul_n=64, convs=((1, 8, 8),), copy_bytes=2**20, int8_n=32, reps=3, warmup=1,
             threads=(1,))


@pytest.fixture(autouse=True)
def ceilings_file(tmp_path, monkeypatch):
    path = tmp_path / "ceilings.json"
    monkeypatch.setenv("TORCHPERF_CEILINGS", str(path))
    return path


def test_the_cpu_compute_ceiling_is_the_best_of_every_workload_tried_and_says_which():
    said = []
    result = measure_ceilings("cpu", on_progress=said.append, **SMALL)
    compute, copy = result.compute("float32"), result.copy()
    float8 = [("compute", "float8")] if runs_float8(torch.device("cpu")) else []  # this torch build's CPU has it
    assert [(c.kind, c.dtype) for c in result.ceilings] == [("compute", "float32"), ("compute", "int8"), *float8,
                                                              ("copy", "float32")]
    assert result.compute("float16") is None
    int8 = result.compute("int8")  # torch._int_mm: what a quantization scheme's prediction computes int8 at
    assert (int8.workload, int8.size) == ("matmul int8", "32x32x32") and int8.value == pytest.approx(
        2 * 32**3 / int8.median_s)
    if float8:  # torch._scaled_mm at the int8 matmul's size: what fp8's prediction computes at
        low = result.compute("float8")
        assert (low.workload, low.size) == ("matmul float8", "32x32x32") and low.value == pytest.approx(
            2 * 32**3 / low.median_s)
    tried = {(t.workload, t.size): t for t in compute.tried}
    assert set(tried) == {("matmul", "32x32x32"), ("matmul", "64x64x64"), ("matmul x@W^T", "64x64x64"),
                          ("matmul tall-skinny", "256x64x16"), ("conv2d 3x3", "1x8x8x8 -> 8"),
                          ("conv2d 3x3 channels_last", "1x8x8x8 -> 8")}
    top = max(compute.tried, key=lambda t: t.value)
    assert compute.value == top.value and (compute.workload, compute.size, compute.threads) == (
        top.workload, top.size, 1)
    square = tried[("matmul", "64x64x64")]
    assert square.value == pytest.approx(2 * 64**3 / square.median_s)  # 2 m k n
    conv = tried[("conv2d 3x3", "1x8x8x8 -> 8")]
    assert conv.value == pytest.approx(2 * 1 * 8 * 8 * 8 * 8 * 3 * 3 / conv.median_s)  # 2 N Cout Hout Wout Cin k k
    assert all(t.reps >= 3 for t in compute.tried)
    assert copy.value == pytest.approx(2 * 2**20 / copy.median_s) and copy.size == "1.0 MiB"  # read + written
    assert result.key == device_key(torch.device("cpu")) and f"threads {torch.get_num_threads()}" in result.key
    assert "float32 conv2d 3x3 channels_last 1x8x8x8 -> 8" in said and result.seconds > 0


def test_a_gpu_runs_float8_matmuls_from_compute_capability_8_9(monkeypatch):
    for capability, runs in (((8, 6), False), ((8, 9), True), ((9, 0), True)):
        monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None, c=capability: c)
        assert runs_float8(torch.device("cuda")) is runs, capability


def _rates(**by_name):
    """A fake timing seam: each workload at the rate (FLOP/s) its name is given, twice as fast at 2 threads."""
    calls = []

    def time_workload(workload, dtype, threads):
        calls.append((workload.name, workload.size, threads))
        rate = by_name.get(workload.name, 1e9) * (2 if threads == 2 else 1)
        return workload.amount / rate, 5

    return time_workload, calls


def test_the_best_workload_and_thread_count_win_and_only_the_best_run_again_at_the_other_count():
    before = torch.get_num_threads()
    fake, calls = _rates(**{"conv2d 3x3 channels_last": 5e9, "matmul x@W^T": 3e9})
    result = measure_ceilings("cpu", matmul_sizes=(32, 64), matmul_n=64, convs=((1, 8, 8), (2, 16, 4)),
                              copy_bytes=2**20, threads=(1, 2), time_workload=fake)
    compute = result.compute("float32")
    assert compute.value == pytest.approx(10e9) and compute.workload == "conv2d 3x3 channels_last"
    assert compute.threads == 2 and compute.origin.endswith(", 2 threads")
    again = [(name, size) for name, size, threads in calls if threads == 2 and name != "copy"]
    assert again == [("matmul x@W^T", "64x64x64"), ("conv2d 3x3 channels_last", "1x8x8x8 -> 8")]
    assert result.copy().threads == 2  # the copy at each count, the best kept
    assert torch.get_num_threads() == before  # restored after each thread count


def test_a_size_above_the_reference_is_skipped_when_a_repetition_would_not_fit_the_budget_and_says_so():
    fake, calls = _rates(matmul=1e9)
    result = measure_ceilings("cpu", matmul_sizes=(32, 64, 4096), matmul_n=64, convs=(), copy_bytes=2**20,
                              threads=(1,), budget_s=0.2, time_workload=fake)
    skipped = next(t for t in result.compute("float32").tried if t.size == "4096x4096x4096")
    assert skipped.value is None and "one repetition would take about 1.4e+02 s at the rate so far (the budget: 0.1 s)" in skipped.skipped
    assert ("matmul", "4096x4096x4096", 1) not in calls and ("matmul", "64x64x64", 1) in calls
    fast, calls = _rates(matmul=1e15)  # a box fast enough: the large size is measured
    result = measure_ceilings("cpu", matmul_sizes=(32, 64, 4096), matmul_n=64, convs=(), copy_bytes=2**20,
                              threads=(1,), budget_s=0.2, time_workload=fast)
    assert ("matmul", "4096x4096x4096", 1) in calls


def test_a_cancel_between_or_within_workloads_stops_the_measurement():
    asked = []

    def cancel_on_third() -> bool:
        asked.append(1)
        return len(asked) >= 3

    with pytest.raises(TorchperfError, match="cancelled"):
        measure_ceilings("cpu", should_cancel=cancel_on_third, **SMALL)
    with pytest.raises(TorchperfError, match="cancelled"):
        measure_ceilings("cpu", should_cancel=lambda: True, **SMALL)


def test_an_earlier_versions_kept_ceiling_is_read_marked_outdated_and_measured_again(ceilings_file, capsys):
    key = device_key(torch.device("cpu"))
    old = {"device": "cpu", "key": key, "measured_at": 1.0, "ceilings": [
        {"kind": "matmul", "dtype": "float32", "value": 3.2e11, "size": "2048x2048x2048", "median_s": 0.05,
         "reps": 10},
        {"kind": "copy", "dtype": "float32", "value": 2.6e10, "size": "256 MiB", "median_s": 0.02, "reps": 10}]}
    ceilings_file.write_text(json.dumps({"devices": {key: old}}))
    kept = load_ceilings(key)
    assert kept.format == 1 and kept.outdated == OUTDATED and REMEASURE in OUTDATED
    assert kept.compute("float32").value == 3.2e11 and kept.compute("float32").workload == "matmul"
    code, out, _ = run(capsys, "info")
    assert code == 0 and "float32 matmul 0.32 TFLOP/s" in out and "kept by an earlier torchperf-tui" in out
    assert "kept by an earlier" in peaks_for("cpu", "float32", measured=kept).notes[0]
    fresh = ceilings("cpu", **SMALL)  # not asked to refresh, but an outdated entry is measured again
    assert not fresh.cached and fresh.outdated is None
    assert load_ceilings(key).format == FORMAT and load_ceilings(key).compute("float32").tried


def test_they_are_kept_per_device_and_measured_again_only_on_request(ceilings_file):
    first = ceilings("cpu", **SMALL)
    assert not first.cached and first.path == str(ceilings_file)
    again = ceilings("cpu", **SMALL)
    assert again.cached and again.measured_at == first.measured_at
    assert [c.value for c in again.ceilings] == [c.value for c in first.ceilings]
    fresh = ceilings("cpu", refresh=True, **SMALL)
    assert not fresh.cached and fresh.measured_at > first.measured_at
    assert again.compute("float32").tried == first.compute("float32").tried  # each workload tried, kept
    other = CeilingsResult(device="cuda:0", key="Some GPU | torch x", measured_at=1.0,
                           ceilings=[Ceiling("copy", "float32", 1e12, "2048 MiB", 0.004, 10)])
    save_ceilings(other)
    kept = json.loads(ceilings_file.read_text())["devices"]
    assert set(kept) == {fresh.key, "Some GPU | torch x"}  # each device keeps its own


def test_a_file_that_is_not_ours_is_neither_read_nor_overwritten(ceilings_file):
    ceilings_file.write_text("my notes, not JSON")
    with pytest.raises(TorchperfError, match="is not JSON"):
        load_ceilings(device_key(torch.device("cpu")))
    with pytest.raises(TorchperfError, match="is not JSON"):
        ceilings("cpu", **SMALL)
    assert ceilings_file.read_text() == "my notes, not JSON"
    ceilings_file.write_text('{"notes": "mine"}')
    with pytest.raises(TorchperfError, match="is not a ceilings file"):
        ceilings("cpu", refresh=True, **SMALL)
    assert ceilings_file.read_text() == '{"notes": "mine"}'


def test_on_the_cpu_the_measured_ceilings_replace_the_missing_peaks():
    measured = CeilingsResult(device="cpu", key="cpu | t", measured_at=1.0,
                              ceilings=[Ceiling("compute", "float32", 2e11, "2048x2048x2048", 0.086, 10),
                                        Ceiling("copy", "float32", 1e10, "256 MiB", 0.05, 10)])
    peaks = peaks_for("cpu", "float32", measured=measured)
    assert peaks.peak_tflops == pytest.approx(0.2) and peaks.peak_bandwidth_gbs == pytest.approx(10.0)
    assert peaks.ridge_flops_per_byte == pytest.approx(20.0) and "measured on this box" in peaks.source
    bare = peaks_for("cpu", "float32")
    assert "CPU peak FLOP/s needs" in bare.peak_tflops.reason and "torchperf-tui ceilings" in bare.measured_tflops.reason
    # bfloat16 was not measured on the CPU: no stand-in, the reason says which ceiling is missing
    assert "no bfloat16 compute ceiling" in peaks_for("cpu", "bfloat16", measured=measured).measured_tflops.reason


def test_the_roofline_command_gives_mfu_against_the_kept_ceilings(capsys):
    tiny = ["tests.tinymodels:tiny_cnn", "--input", "1x3x16x16", "--iters", "5"]
    code, out, _ = run(capsys, "roofline", *tiny)
    assert code == 0 and "run `torchperf-tui ceilings`" in out  # none kept yet: says how to get them
    code, out, _ = run(capsys, "ceilings", "--device", "cpu")
    assert code == 0 and "measured now in " in out and "copy (read + write)" in out
    assert "workloads tried" in out and "conv2d 3x3 channels_last" in out and "matmul x@W^T" in out
    code, out, _ = run(capsys, "roofline", *tiny, "--json")
    data = json.loads(out)
    assert data["measured_tflops"] > 0 and data["measured_mfu_pct"] > 0 and data["peak_tflops"] == data[
        "measured_tflops"]  # on the CPU the measured ceiling is the roofline's peak
    code, out, _ = run(capsys, "ceilings", "--json")
    data = json.loads(out)
    assert data["cached"] is True and data["outdated"] is None and len(data["ceilings"][0]["tried"]) >= 9


def test_the_roofline_command_says_a_utilisation_above_a_low_kept_ceiling_is_no_fact(ceilings_file, capsys):
    tiny = ["tests.tinymodels:tiny_cnn", "--input", "1x3x16x16", "--iters", "5"]
    low = CeilingsResult(device="cpu", key=device_key(torch.device("cpu")), measured_at=1.0, ceilings=[
        Ceiling("compute", "float32", 1e3, "64x64x64", 0.5, 3),  # 1 kFLOP/s: every model beats it
        Ceiling("copy", "float32", 1e12, "1 MiB", 1e-6, 3)])
    save_ceilings(low)
    code, out, _ = run(capsys, "roofline", *tiny)
    assert code == 0
    mfu = next(line for line in out.splitlines() if line.startswith("MFU (of peak FLOP/s)"))
    assert "above the measured ceiling (" in mfu and f"the ceiling is too low; {REMEASURE}" in mfu
    assert "measured ceiling" in out and "this box's best: matmul 64x64x64" in out
    code, out, _ = run(capsys, "roofline", *tiny, "--json")
    data = json.loads(out)
    assert data["exceeds_ceiling"] is True and data["mfu_pct"] > 100
    assert data["above_ceiling"]["mfu_pct"].startswith("above the measured ceiling (")
    assert data["above_ceiling"]["measured_mfu_pct"] == data["above_ceiling"]["mfu_pct"]


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device (none on this machine)")
def test_gpu_ceilings_cover_fp32_tf32_fp16_bf16_and_restore_tf32():
    before = torch.backends.cuda.matmul.allow_tf32
    result = measure_ceilings("cuda", matmul_sizes=(1024, 2048), matmul_n=2048, copy_bytes=2**28, reps=3)
    assert [c.dtype for c in result.ceilings if c.kind == "compute"] == ["float32", "tf32", "float16", "bfloat16"]
    assert result.compute("float16").value > result.compute("float32").value
    assert torch.backends.cuda.matmul.allow_tf32 == before


def test_ceilings_at_a_thread_count_are_measured_and_kept_under_it(monkeypatch):
    """`ceilings --threads 1`: measured at that count alone and with it in effect, so a run of --threads 1 finds them
    under its key (a CPU's ceilings are kept per thread count)."""
    from types import SimpleNamespace

    from torchperf_tui.measure import runners

    seen = {}

    def fake(device, refresh=False, should_cancel=None, on_progress=None, **options):
        seen.update(options, in_effect=torch.get_num_threads(), device=device)
        return "kept"

    monkeypatch.setattr(runners, "ceilings", fake)
    before = torch.get_num_threads()
    ctx = SimpleNamespace(cancelled=lambda: False, progress=lambda what, data: None)
    assert runners.ceilings_job({"device": "cpu", "threads": 1}, ctx) == ("kept", {})
    assert seen == {"threads": (1,), "in_effect": 1, "device": "cpu"} and torch.get_num_threads() == before
