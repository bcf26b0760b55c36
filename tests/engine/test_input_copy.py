"""The input copy's share of a pass (the issue's second half): where a run's inputs would come from the host, one pass's
input bytes over the kept pinned and pageable host-to-device ceilings, as time and as a share of copy + pass; an
estimate, said as one, in bench's rows and its --json. On the CPU nothing is said: the inputs are in the host's
memory already."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
import torch

from tests.engine.test_transfer_ceilings import GPU_KEY, H200_TRANSFERS, gpu_entry
from tests.test_cli import run
from torchperf_tui.core.stats import compute_stats
from torchperf_tui.engine.hardware.ceilings import NO_TRANSFERS_KEPT, load_ceilings
from torchperf_tui.engine.hardware.input_copy import (NO_CEILINGS, NO_TRANSFER, InputCopy, estimate_input_copy,
                                                      input_copy_of)
from torchperf_tui.engine.measurements.bench_config import BenchConfig
from torchperf_tui.engine.measurements.ceiling_measurement import ceilings
from torchperf_tui.engine.measurements.flags import Flags
from torchperf_tui.engine.measurements.timing import TimingResult, run_benchmark
from torchperf_tui.engine.workloads.input_spec import InputSpec, ShapeFeed
from torchperf_tui.wording.timing import input_copy_text, timing_rows

TINY = "tests.tinymodels:tiny_cnn"
IMAGE_BYTES = 8 * 3 * 224 * 224 * 4  # a batch of 8 float32 images: 4.6 MiB


@pytest.fixture
def kept_file(tmp_path, monkeypatch):
    path = tmp_path / "kept-ceilings.json"
    monkeypatch.setenv("TORCHPERF_CEILINGS", str(path))
    return path


def gpu_run(nbytes: int | None = IMAGE_BYTES, p50_ms: float = 2.0, device: str = "cuda:0"):
    """A finished run as input_copy_of reads it: its device, its inputs' bytes a pass, its median."""
    return SimpleNamespace(device=device, input_bytes=nbytes, stats=SimpleNamespace(p50_ms=p50_ms))


def test_the_copy_is_the_inputs_bytes_over_each_kept_ceiling_and_its_share_of_copy_and_pass(kept_file):
    kept_file.write_text(json.dumps({"devices": {GPU_KEY: gpu_entry(transfers=H200_TRANSFERS)}}))
    asked = []

    def kept_of(device):
        asked.append(device)
        return load_ceilings(GPU_KEY)

    copy = input_copy_of(gpu_run(), kept_of=kept_of)
    assert asked == ["cuda:0"] and copy.missing is None and (copy.bytes, copy.pass_ms) == (IMAGE_BYTES, 2.0)
    pinned_ms, pageable_ms = IMAGE_BYTES / 55e9 * 1e3, IMAGE_BYTES / 20e9 * 1e3  # 0.088 ms, 0.241 ms
    assert copy.pinned_ms == pytest.approx(pinned_ms) and copy.pageable_ms == pytest.approx(pageable_ms)
    assert copy.pinned_pct == pytest.approx(100 * pinned_ms / (pinned_ms + 2.0))  # 4.2 %
    assert copy.pageable_pct == pytest.approx(100 * pageable_ms / (pageable_ms + 2.0))  # 10.7 %
    assert (copy.pinned_bytes_per_s, copy.pageable_bytes_per_s) == (55e9, 20e9)
    assert input_copy_text(copy) == ("4.6 MiB a pass from the host: pinned 88 µs, 4.2 % of copy + pass · pageable "
                                     "241 µs, 10.7 %; from the measured host-to-device ceilings (55.0 GB/s pinned, "
                                     "20.0 GB/s pageable), not timed in the run")


def test_a_copy_far_below_a_microsecond_is_said_as_such_not_as_zero():
    kept = SimpleNamespace(transfer=lambda direction, memory: SimpleNamespace(value=50e9 if memory == "pinned"
                                                                               else 10e9),
                           no_transfers=None)
    copy = estimate_input_copy(4096, 5.0, kept)
    assert input_copy_text(copy).startswith("4.0 KiB a pass from the host: pinned under 1 µs, under 0.1 % of copy + "
                                            "pass · pageable under 1 µs, under 0.1 %;")


def test_without_transfer_ceilings_kept_it_says_why_and_how_to_measure_them(kept_file):
    assert input_copy_of(gpu_run(), kept_of=lambda device: None).missing == NO_CEILINGS
    kept_file.write_text(json.dumps({"devices": {GPU_KEY: gpu_entry(fmt=2)}}))  # kept before the transfers
    old = input_copy_of(gpu_run(), kept_of=lambda device: load_ceilings(GPU_KEY))
    assert old.missing == NO_TRANSFERS_KEPT and old.pinned_ms is None and "--refresh" in old.missing
    kept_file.write_text(json.dumps({"devices": {GPU_KEY: gpu_entry(transfers=[])}}))
    assert input_copy_of(gpu_run(), kept_of=lambda device: load_ceilings(GPU_KEY)).missing == NO_TRANSFER
    kept_file.write_text(json.dumps({"devices": {GPU_KEY: gpu_entry(transfers=[{"kind": "transfer"}])}}))
    corrupt = input_copy_of(gpu_run(), kept_of=lambda device: load_ceilings(GPU_KEY))  # a run is not failed by it
    assert "the entry of this device is corrupt" in corrupt.missing and corrupt.bytes == IMAGE_BYTES
    assert input_copy_text(corrupt).startswith("not estimated: the ceilings file")
    only_pinned = gpu_entry(transfers=[H200_TRANSFERS[0]])
    kept_file.write_text(json.dumps({"devices": {GPU_KEY: only_pinned}}))
    one = input_copy_of(gpu_run(), kept_of=lambda device: load_ceilings(GPU_KEY))
    assert one.pinned_ms is not None and one.pageable_ms is None and "pageable" not in input_copy_text(one)


def test_on_the_cpu_or_without_a_median_nothing_is_estimated():
    never = []
    assert input_copy_of(gpu_run(device="cpu"), kept_of=never.append) is None
    assert input_copy_of(SimpleNamespace(device="cuda:0", input_bytes=4, stats=None), kept_of=never.append) is None
    assert never == []  # the ceilings are not even read


def test_bench_says_the_estimate_in_its_rows_and_its_json_on_a_gpu_and_nothing_on_the_cpu():
    samples = [2.0, 2.0, 2.0]
    result = TimingResult(model="resnet50", device="cuda:0", input_shape=(8, 3, 224, 224), dtype="float32",
                          channels_last=False, flags=Flags(), first_iter_ms=9.0, warmup_ms=[], samples_ms=samples,
                          stats=compute_stats(samples, batch=8), cancelled=False, started_at=1.0, duration_s=1.0,
                          timer="cuda-events", input_bytes=IMAGE_BYTES)
    result.input_copy = estimate_input_copy(IMAGE_BYTES, 2.0, SimpleNamespace(
        transfer=lambda direction, memory: SimpleNamespace(value=55e9 if memory == "pinned" else 20e9)))
    rows = {label: value for label, value, _ in timing_rows(result)}
    assert rows["input copy (estimate)"].startswith("4.6 MiB a pass from the host: pinned 88 µs, 4.2 % of copy")
    labels = [label for label, _, _ in timing_rows(result)]
    assert labels.index("input copy (estimate)") == labels.index("throughput, mean") + 1  # beside the pass it is of
    data = json.loads(json.dumps(result.to_dict()))
    assert data["input_bytes"] == IMAGE_BYTES and data["input_copy"]["pinned_pct"] == pytest.approx(4.2, abs=0.05)
    assert data["input_copy"]["missing"] is None and data["input_copy"]["pageable_ms"] == pytest.approx(0.2408, 1e-3)
    on_cpu = TimingResult(**{**vars(result), "device": "cpu", "input_copy": None})
    assert not [label for label, _, _ in timing_rows(on_cpu) if "input copy" in label]


def test_a_run_knows_its_inputs_bytes_a_pass():
    cfg = BenchConfig(model=TINY, input_shape=(2, 3, 16, 16), device="cpu", warmup=0, iters=3)
    result = run_benchmark(cfg)
    assert result.input_bytes == 2 * 3 * 16 * 16 * 4 and result.input_copy is None
    half = run_benchmark(BenchConfig(model=TINY, input_shape=(2, 3, 16, 16), device="cpu", warmup=0, iters=3,
                                     dtype="bfloat16"))
    assert half.input_bytes == 2 * 3 * 16 * 16 * 2  # as made on the device, in the run's dtype


def test_where_the_shapes_vary_a_pass_is_the_mean_of_the_inputs_fed():
    spec = InputSpec((2, 3, 8, 8))
    feed = ShapeFeed(spec.make(), spec, [(2, 3, 8, 8), (4, 3, 8, 8), (4, 3, 8, 8), (1, 3, 8, 8)], torch.float32,
                     torch.device("cpu"), False, 0, None)
    assert feed.bytes_per_pass == 2 * 3 * 8 * 8 * 4  # none fed yet: the configured shape's
    for index in range(4):
        feed.advance(index)
    assert feed.bytes_per_pass == round((2 + 4 + 4 + 1) * 3 * 8 * 8 * 4 / 4)


def test_the_cli_bench_says_nothing_of_a_copy_on_the_cpu(capsys):
    code, out, _ = run(capsys, "bench", TINY, "--input", "1x3x8x8", "--iters", "3", "--warmup", "0", "--no-history")
    assert code == 0 and "p50" in out and "input copy" not in out
    code, out, _ = run(capsys, "bench", TINY, "--input", "1x3x8x8", "--iters", "3", "--warmup", "0", "--no-history",
                       "--json")
    data = json.loads(out)
    assert data["input_bytes"] == 1 * 3 * 8 * 8 * 4 and data["input_copy"] is None


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device (none on this machine)")
def test_a_gpu_run_estimates_its_input_copy_from_the_transfers_measured_on_it(kept_file, capsys):
    measured = ceilings("cuda", refresh=True, matmul_sizes=(1024,), matmul_n=1024, convs=(), copy_bytes=2**26,
                        int8_n=1024, reps=3)
    assert measured.transfer("h2d", "pinned") is not None
    code, out, _ = run(capsys, "bench", TINY, "--device", "cuda", "--input", "8x3x64x64", "--iters", "20",
                       "--no-history", "--json")
    assert code == 0
    copy = InputCopy(**json.loads(out)["input_copy"])
    assert copy.missing is None and copy.bytes == 8 * 3 * 64 * 64 * 4
    assert 0 < copy.pinned_ms and 0 < copy.pinned_pct < 100 and 0 < copy.pageable_pct < 100
    assert copy.pinned_ms == pytest.approx(copy.bytes / measured.transfer("h2d", "pinned").value * 1e3)
