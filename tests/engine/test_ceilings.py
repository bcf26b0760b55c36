"""Measured ceilings (issue 14 §3): a large matmul per dtype and a large copy, kept per device fingerprint in the
user data directory, measured again on request; the roofline gives MFU against them, and on the CPU they stand
in for the datasheet peaks the OS cannot report."""

from __future__ import annotations

import json

import pytest
import torch

from tests.test_cli import run
from torchperf_tui.engine.ceilings import (Ceiling, CeilingsResult, ceilings, device_key, load_ceilings,
                                           measure_ceilings, save_ceilings)
from torchperf_tui.engine.errors import TorchperfError
from torchperf_tui.engine.roofline import peaks_for

SMALL = dict(matmul_n=64, copy_bytes=2**20, reps=3, warmup=1)


@pytest.fixture(autouse=True)
def ceilings_file(tmp_path, monkeypatch):
    path = tmp_path / "ceilings.json"
    monkeypatch.setenv("TORCHPERF_CEILINGS", str(path))
    return path


def test_the_cpu_gets_an_fp32_matmul_ceiling_and_a_copy_bandwidth():
    result = measure_ceilings("cpu", **SMALL)
    matmul, copy = result.matmul("float32"), result.copy()
    assert [c.kind for c in result.ceilings] == ["matmul", "copy"] and result.matmul("float16") is None
    assert matmul.value == pytest.approx(2 * 64**3 / matmul.median_s) and matmul.size == "64x64x64"
    assert copy.value == pytest.approx(2 * 2**20 / copy.median_s) and copy.size == "1 MiB"  # read + written
    assert result.key == device_key(torch.device("cpu")) and f"threads {torch.get_num_threads()}" in result.key


def test_they_are_kept_per_device_and_measured_again_only_on_request(ceilings_file):
    first = ceilings("cpu", **SMALL)
    assert not first.cached and first.path == str(ceilings_file)
    again = ceilings("cpu", **SMALL)
    assert again.cached and again.measured_at == first.measured_at
    assert [c.value for c in again.ceilings] == [c.value for c in first.ceilings]
    fresh = ceilings("cpu", refresh=True, **SMALL)
    assert not fresh.cached and fresh.measured_at > first.measured_at
    other = CeilingsResult(device="cuda:0", key="Some GPU | torch x", measured_at=1.0,
                           ceilings=[Ceiling("copy", "float32", 1e12, "2048 MiB", 0.004, 10)])
    save_ceilings(other)
    kept = json.loads(ceilings_file.read_text())["devices"]
    assert set(kept) == {fresh.key, "Some GPU | torch x"}  # each device keeps its own


def test_a_file_that_is_not_ours_is_neither_read_nor_overwritten(ceilings_file):
    ceilings_file.write_text("my notes, not JSON")
    assert load_ceilings(device_key(torch.device("cpu"))) is None
    with pytest.raises(TorchperfError, match="is not a ceilings file: not overwritten"):
        ceilings("cpu", **SMALL)
    assert ceilings_file.read_text() == "my notes, not JSON"


def test_on_the_cpu_the_measured_ceilings_replace_the_missing_peaks():
    measured = CeilingsResult(device="cpu", key="cpu | t", measured_at=1.0,
                              ceilings=[Ceiling("matmul", "float32", 2e11, "2048x2048x2048", 0.086, 10),
                                        Ceiling("copy", "float32", 1e10, "256 MiB", 0.05, 10)])
    peaks = peaks_for("cpu", "float32", measured=measured)
    assert peaks.peak_tflops == pytest.approx(0.2) and peaks.peak_bandwidth_gbs == pytest.approx(10.0)
    assert peaks.ridge_flops_per_byte == pytest.approx(20.0) and "measured on this box" in peaks.source
    bare = peaks_for("cpu", "float32")
    assert "CPU peak FLOP/s needs" in bare.peak_tflops.reason and "torchperf-tui ceilings" in bare.measured_tflops.reason
    # bfloat16 was not measured on the CPU: no stand-in, the reason says which ceiling is missing
    assert "no bfloat16 matmul ceiling" in peaks_for("cpu", "bfloat16", measured=measured).measured_tflops.reason


def test_the_roofline_command_gives_mfu_against_the_kept_ceilings(capsys):
    tiny = ["tests.tinymodels:tiny_cnn", "--input", "1x3x16x16", "--iters", "5"]
    code, out, _ = run(capsys, "roofline", *tiny)
    assert code == 0 and "run `torchperf-tui ceilings`" in out  # none kept yet: says how to get them
    code, out, _ = run(capsys, "ceilings", "--device", "cpu")
    assert code == 0 and "measured now" in out and "matmul" in out and "copy (read + write)" in out
    code, out, _ = run(capsys, "roofline", *tiny, "--json")
    data = json.loads(out)
    assert data["measured_tflops"] > 0 and data["measured_mfu_pct"] > 0 and data["peak_tflops"] == data[
        "measured_tflops"]  # on the CPU the measured ceiling is the roofline's peak
    code, out, _ = run(capsys, "ceilings", "--json")
    assert json.loads(out)["cached"] is True


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device (none on this machine)")
def test_gpu_ceilings_cover_fp32_tf32_fp16_bf16_and_restore_tf32():
    before = torch.backends.cuda.matmul.allow_tf32
    result = measure_ceilings("cuda", matmul_n=2048, copy_bytes=2**28, reps=3)
    assert [c.dtype for c in result.ceilings if c.kind == "matmul"] == ["float32", "tf32", "float16", "bfloat16"]
    assert result.matmul("float16").value > result.matmul("float32").value
    assert torch.backends.cuda.matmul.allow_tf32 == before
