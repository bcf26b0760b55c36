import pytest

from torchperf_tui.engine.workloads.complexity import Complexity, LayerStat, analyse_complexity
from torchperf_tui.engine.hardware.device import GpuFacts
from torchperf_tui.core.errors import TorchperfError
from torchperf_tui.engine.hardware.nvml import NA
from torchperf_tui.engine.analysis.layer_times import GpuBusy, LayerTimes, ModuleTime
from torchperf_tui.engine.analysis.roofline import (BYTES_METHOD, GPU_IDLE, OUTSIDE_ROWS, REMEASURE, analyse_roofline,
                                           estimate_bytes, gpu_for_device, utilisation_text,
                                           peaks_for, ridge_point)
from torchperf_tui.engine.measurements.bench_config import BenchConfig
from torchperf_tui.engine.measurements.timing import run_benchmark


def _gpu(fp32=60.0, fp16=1000.0, bw=3000.0):
    return GpuFacts(index=0, name="Fake GPU", compute_capability="9.0", sm_count=132, total_memory_bytes=1,
                    l2_cache_bytes=1, max_sm_clock_mhz=1, max_mem_clock_mhz=1, memory_bus_width_bits=1,
                    power_limit_w=1.0, peak_fp32_tflops=fp32, peak_fp16_tensor_tflops=fp16,
                    peak_bf16_tensor_tflops=fp16, peak_bandwidth_gbs=bw,
                    formulas={"fp32": "1 x 2 = 60 TFLOP/s", "bandwidth": "x = 3000 GB/s"})


def _complexity(layers, flops=None, dtype="float32", shape=(1, 4)):
    return Complexity(model="m", input_shape=shape, dtype=dtype, params_total=0, params_trainable=0,
                      size_bytes=0, size_mb=0.0, flops=flops if flops is not None else sum(l.flops for l in layers),
                      macs=0, layers=layers)


# A matmul-heavy layer (intensity high) and an elementwise one (intensity low).
DENSE = LayerStat("fc", "Linear", (1, 1000), (1, 1000), params=1_000_000, flops=2_000_000_000,
                  output_bytes=4000)
RELU = LayerStat("act", "ReLU", (1, 1000), (1, 1000), params=0, flops=0, output_bytes=4000)


def test_ridge_is_peak_flops_over_peak_bandwidth():
    assert ridge_point(60.0, 3000.0) == pytest.approx(60e12 / 3000e9)  # 20 FLOPs per byte
    assert isinstance(ridge_point(NA("x"), 3000.0), NA)


def test_dtype_picks_the_matching_peak_and_cpu_is_na_with_reasons():
    gpu = _gpu()
    assert peaks_for("cuda", "float32", gpu).peak_tflops == 60.0
    assert peaks_for("cuda", "float16", gpu).peak_tflops == 1000.0
    assert "60 TFLOP/s" in peaks_for("cuda", "float32", gpu).source
    cpu = peaks_for("cpu", "float32")
    assert isinstance(cpu.peak_tflops, NA) and "FMA" in cpu.peak_tflops.reason
    assert isinstance(cpu.ridge_flops_per_byte, NA)
    given = peaks_for("cpu", "float32", peak_tflops=2.0, peak_bandwidth_gbs=100.0)
    assert given.ridge_flops_per_byte == pytest.approx(20.0) and "user" in given.source
    assert peaks_for("cuda", "float32", gpu, tf32=True).notes


def test_bytes_are_weights_inputs_and_outputs_once_each():
    c = _complexity([DENSE, RELU])
    nbytes, method = estimate_bytes(c)
    assert nbytes == (1_000_000 * 4 + 1000 * 4 + 4000) + (1000 * 4 + 4000)
    assert method == BYTES_METHOD
    half, _ = estimate_bytes(_complexity([DENSE], dtype="float16"))
    assert half == 1_000_000 * 2 + 1000 * 2 + 4000  # output_bytes is already in the run's dtype


def test_model_numbers_and_sides_per_layer():
    c = _complexity([DENSE, RELU])
    peaks = peaks_for("cuda", "float32", _gpu())
    r = analyse_roofline(c, 1.0, peaks)  # 2 GFLOP in 1 ms
    assert r.achieved_tflops == pytest.approx(2.0)
    assert r.mfu_pct == pytest.approx(100 * 2.0 / 60.0)
    nbytes = estimate_bytes(c)[0]
    assert r.arithmetic_intensity == pytest.approx(2e9 / nbytes)
    assert r.achieved_bandwidth_gbs == pytest.approx(nbytes / 1e-3 / 1e9)
    assert r.ridge_flops_per_byte == pytest.approx(20.0)
    assert r.side == "compute"  # ~496 FLOPs per byte, far right of the ridge
    assert r.attainable_tflops == pytest.approx(60.0) and r.roofline_pct == pytest.approx(r.mfu_pct)
    fc, act = r.layers
    assert fc.side == "compute" and act.side == "memory" and act.intensity == 0.0
    assert act.attainable_tflops == 0.0
    assert isinstance(fc.achieved_tflops, NA)  # no per-layer times given
    assert r.to_dict()["layers"][1]["achieved_tflops"].startswith("n/a")


def test_memory_bound_model_is_capped_by_bandwidth():
    c = _complexity([RELU], flops=16_000)  # 16 kFLOP over 8 kB: 2 FLOPs per byte
    r = analyse_roofline(c, 0.001, peaks_for("cuda", "float32", _gpu()))
    assert r.side == "memory"
    assert r.attainable_tflops == pytest.approx(2.0 * 3000e9 / 1e12)


def _times(gpu=None, **outside):
    # fc and act are the table's rows; "block" is a container that only calls them (its residual add, its Python)
    modules = [ModuleTime("", "Net", False, 0.02), ModuleTime("block", "Block", False, 0.03),
               ModuleTime("fc", "Linear", True, 0.5, calls=1), ModuleTime("act", "ReLU", True, 0.1, calls=2)]
    return LayerTimes(model="m", device="cuda" if gpu else "cpu", input_shape=(1, 4), step="infer", iters=5,
                      pass_ms=0.7, modules=modules, outside=outside, gpu=gpu)


def test_per_layer_time_share_and_achieved_with_what_no_row_owns_said_apart():
    c = _complexity([DENSE, RELU])
    r = analyse_roofline(c, 1.0, peaks_for("cuda", "float32", _gpu()), layer_times=_times(**{"rest of the iteration": 0.05}))
    fc, act = r.layers
    assert fc.time_ms == pytest.approx(0.5) and fc.achieved_tflops == pytest.approx(4.0)
    assert fc.roofline_pct == pytest.approx(100 * 4.0 / 60.0)
    assert fc.pass_pct == pytest.approx(100 * 0.5 / 0.7) and act.pass_pct == pytest.approx(100 * 0.1 / 0.7)
    assert isinstance(act.achieved_tflops, NA) and "no FLOPs" in act.achieved_tflops.reason
    # The model's and the block's own time (no FLOPs of their own, so no rows) is one outside row.
    assert r.time_outside == {OUTSIDE_ROWS: pytest.approx(0.05), "rest of the iteration": 0.05}
    assert sum(l.time_ms for l in r.layers) + sum(r.time_outside.values()) == pytest.approx(0.7)
    data = r.to_dict()
    assert data["layers"][0]["pass_pct"] == pytest.approx(fc.pass_pct) and data["layer_times"]["pass_ms"] == 0.7


def test_on_a_gpu_the_idle_time_completes_the_rows_and_a_mostly_idle_pass_is_launch_bound():
    busy = GpuBusy(busy_ms=0.63, wall_ms=0.7, kernels=40, median_kernel_us=9.5)
    r = analyse_roofline(_complexity([DENSE, RELU]), 1.0, peaks_for("cuda", "float32", _gpu()),
                         layer_times=_times(gpu=busy))
    assert r.time_outside[GPU_IDLE] == pytest.approx(0.07)
    assert busy.summary().startswith("GPU busy 90 % of the pass") and "40 kernels" in busy.summary()
    idle = GpuBusy(busy_ms=0.2, wall_ms=0.7, kernels=40, median_kernel_us=4.0)
    assert idle.summary().startswith("GPU idle 71 % of the pass: launch-bound")


def test_without_layer_times_a_training_step_has_no_rows_and_with_them_its_rows_count_the_backward():
    fc = LayerStat("fc", "Linear", (1, 1000), (1, 1000), params=1_000_000, flops=2_000_000_000, output_bytes=4000,
                   backward_flops=4_000_000_000)
    c = _complexity([fc])
    c.step, c.backward_flops = "train", 4_000_000_000
    assert analyse_roofline(c, 3.0, peaks_for("cuda", "float32", _gpu())).layers == []
    times = _times()
    times.modules[2].backward_ms = 1.0
    row = analyse_roofline(c, 3.0, peaks_for("cuda", "float32", _gpu()), layer_times=times).layers[0]
    assert row.flops == 6_000_000_000 and row.time_ms == pytest.approx(1.5)
    assert row.achieved_tflops == pytest.approx(4.0) and isinstance(row.intensity, NA)


def test_unknown_peaks_leave_utilisation_na_but_keep_achieved():
    c = _complexity([DENSE])
    r = analyse_roofline(c, 2.0, peaks_for("cpu", "float32"))
    assert r.achieved_tflops == pytest.approx(1.0)
    for value in (r.mfu_pct, r.peak_tflops, r.ridge_flops_per_byte, r.side, r.attainable_tflops, r.bandwidth_pct):
        assert isinstance(value, NA) and value.reason


def test_with_a_real_timing_and_complexity_on_cpu():
    shape = (2, 3, 16, 16)
    timing = run_benchmark(BenchConfig(model="tests.tinymodels:tiny_cnn", input_shape=shape, device="cpu",
                                       warmup=1, iters=5))
    c = analyse_complexity("tests.tinymodels:tiny_cnn", shape)
    r = analyse_roofline(c, timing, peaks_for("cpu", "float32", peak_tflops=1.0, peak_bandwidth_gbs=50.0))
    assert r.latency_ms == timing.stats.p50_ms and "median of 5" in r.latency_source
    assert r.achieved_tflops == pytest.approx(c.flops / (timing.stats.p50_ms / 1000) / 1e12)
    assert r.side in ("memory", "compute") and len(r.layers) == len(c.layers)
    with pytest.raises(TorchperfError):
        analyse_roofline(analyse_complexity("tests.tinymodels:tiny_cnn", (4, 3, 16, 16)), timing,
                         peaks_for("cpu", "float32"))


def test_gpu_for_device_picks_by_index():
    report = type("R", (), {"gpus": [_gpu()]})()
    assert gpu_for_device(report, "cuda") is report.gpus[0]
    assert gpu_for_device(report, "cuda:1") is None and gpu_for_device(report, "cpu") is None


def _measured(tflops: float, gbs: float = 10.0):
    """Ceilings 'measured on this box' of `tflops` (fp32 compute) and `gbs` (copy)."""
    from torchperf_tui.engine.hardware.ceilings import Ceiling, CeilingsResult

    return CeilingsResult(device="cpu", key="cpu | t", measured_at=1.0, ceilings=[
        Ceiling("compute", "float32", tflops * 1e12, "16x256x14x14 -> 256", 0.01, 5, "conv2d 3x3", 2),
        Ceiling("copy", "float32", gbs * 1e9, "256 MiB", 0.05, 5, "copy", 2)])


def test_a_utilisation_above_a_measured_ceiling_is_no_fact_it_says_the_ceiling_is_too_low():
    c = _complexity([DENSE])  # 2 GFLOP in 1 ms: 2 TFLOP/s against a ceiling of 1.65
    r = analyse_roofline(c, 1.0, peaks_for("cpu", "float32", measured=_measured(1.65)))
    assert r.mfu_pct == pytest.approx(100 * 2.0 / 1.65) and r.peak_from == "measured"
    assert r.exceeds_ceiling is True
    text = r.above_ceiling["mfu_pct"]
    assert text == f"above the measured ceiling (121 %): the ceiling is too low; {REMEASURE}"
    assert utilisation_text(r, "mfu_pct") == text and utilisation_text(r, "measured_mfu_pct") == text
    assert r.above_ceiling["roofline_pct"] == text  # compute side: the roofline is the ceiling
    assert r.measured_origin == "conv2d 3x3 16x256x14x14 -> 256, 2 threads"
    data = r.to_dict()  # --json: the value kept, marked
    assert data["exceeds_ceiling"] is True and data["above_ceiling"]["mfu_pct"] == text
    assert data["mfu_pct"] == pytest.approx(r.mfu_pct)
    # Under the ceiling: the figure, no flag
    fine = analyse_roofline(c, 1.0, peaks_for("cpu", "float32", measured=_measured(4.0)))
    assert fine.exceeds_ceiling is False and fine.above_ceiling == {}
    assert utilisation_text(fine, "mfu_pct") == "50.0 %"


def test_above_a_datasheet_or_a_given_peak_the_wording_names_that_peak():
    c = _complexity([DENSE])
    gpu = analyse_roofline(c, 1.0, peaks_for("cuda", "float32", _gpu(fp32=1.0), tf32=True))
    assert gpu.above_ceiling["mfu_pct"].startswith("above the datasheet peak (200 %): the peak is too low")
    assert REMEASURE not in gpu.above_ceiling["mfu_pct"]  # measuring again does not change a datasheet
    given = analyse_roofline(c, 1.0, peaks_for("cpu", "float32", peak_tflops=1.0, peak_bandwidth_gbs=1.0))
    assert given.above_ceiling["mfu_pct"].startswith("above the given peak (200 %): the peak given is too low")
    assert given.above_ceiling["bandwidth_pct"].startswith("above the given peak bandwidth")


def test_a_layer_above_its_memory_roof_says_the_roof_is_too_low_without_a_figure():
    # an element-wise layer with a few FLOPs: far on the memory side, and faster than a tiny bandwidth allows
    busy = LayerStat("act", "ReLU", (1, 1000), (1, 1000), params=0, flops=8000, output_bytes=4000)
    c = _complexity([DENSE, busy])
    peaks = peaks_for("cpu", "float32", measured=_measured(100.0, gbs=0.001))
    r = analyse_roofline(c, 1.0, peaks, layer_times=_times())
    act = r.layers[1]
    assert act.side == "memory" and act.roofline_pct > 100
    assert act.above_ceiling.startswith("above the roofline: the memory roof is too low here")
    assert r.to_dict()["layers"][1]["above_ceiling"] == act.above_ceiling


def test_the_gpus_own_counters_over_the_timed_run_are_said_beside_the_roofline():
    from types import SimpleNamespace

    from torchperf_tui.wording.roofline import Footnotes, roofline_rows, roofline_text

    c = _complexity([RELU], flops=16_000)
    timing = SimpleNamespace(stats=SimpleNamespace(p50_ms=1.0, n=5), samples_ms=[1.0] * 5, step="infer",
                             conditions=SimpleNamespace(gpm={"sm_active": 40.0, "dram_active": 83.0}),
                             input_shape=(1, 4),
                             host_noise=None, app_marks=[])
    r = analyse_roofline(c, timing, peaks_for("cuda", "float32", _gpu()))
    assert r.side == "memory" and r.gpm == {"sm_active": 40.0, "dram_active": 83.0}
    assert roofline_text(r).endswith(" · memory bound · GPU counters: SM active 40 % · DRAM 83 %")
    rows = {label: value for label, value, *_ in roofline_rows(r, Footnotes())}
    assert rows["GPU counters"] == "SM active 40 % · DRAM 83 % (GPM, over the timed run)"
    assert analyse_roofline(c, 0.001, peaks_for("cuda", "float32", _gpu())).gpm == {}  # a latency alone: none
