"""The wording package: one wording per result for the CLI and the app, importing neither torch nor Textual."""

import subprocess
import sys
from types import SimpleNamespace

from torchperf_tui.wording import NORMAL, WARNING
from torchperf_tui.wording.conditions import conditions_line_rows, conditions_rows
from torchperf_tui.wording.timing import noise_rows, peak_value, state_rows


def test_wording_imports_neither_torch_nor_textual():
    modules = ("timing", "conditions", "modes", "roofline", "throughput", "compare", "device", "ceilings", "profile",
               "kernels", "complexity")
    code = ("import sys\nimport " + ", ".join(f"torchperf_tui.wording.{name}" for name in modules) + "\n"
            "print(sorted(m for m in ('torch', 'textual') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


class Conditions:
    throttled = throttled_share = 0.25
    gpu_index = 0

    def summary(self):
        return "SM 1410 MHz"

    def short(self, step, brief=False):
        return f"short {step} {brief}"

    def throttle_text(self):
        return "throttled 25 % of the time"

    def energy_text(self, step):
        return f"energy per item ({step})"


def test_conditions_say_throttling_as_a_warning_in_both_places():
    rows = conditions_rows(Conditions(), "train", during="the run")
    assert rows == [("GPU during the run", "SM 1410 MHz", NORMAL), ("throttling", "throttled 25 % of the time", WARNING),
                    ("energy", "energy per item (train)", NORMAL)]
    result = SimpleNamespace(conditions=Conditions(), step="infer")
    assert conditions_line_rows(result, "#3", compact=True) == [("GPU over run #3", "short infer True", WARNING)]
    assert conditions_line_rows(result, "#3")[1] == ("", "throttled 25 % of the time", WARNING)
    assert conditions_rows(None) == [] and conditions_line_rows(SimpleNamespace(), "#3") == []


def test_timing_facts_are_rows_with_levels():
    result = SimpleNamespace(step_peak_bytes=3 * 1024**3, forward_peak_bytes=1024**3, state_notes=["tf32 changed"],
                             host_noise=SimpleNamespace(summary=lambda: "load 0.1"),
                             disturbance_marks=lambda: ["noisy host: load 3"])
    assert peak_value(result) == "training step 3.0 GiB · forward pass alone 1.0 GiB"
    assert peak_value(SimpleNamespace()) is None
    assert state_rows(result) == [("torch state", "tf32 changed", WARNING)]
    assert noise_rows(result) == [("host", "load 0.1", NORMAL), ("warning", "noisy host: load 3", WARNING)]


def _search(**changes):
    result = dict(model="tiny", device="cpu", sample_shape=(3, 16, 16), dtype="float32", samples_per_s=4911.23,
                  best_batch=4, best_try_samples_per_s=4487.1, latency_ms=0.8219, to_oom=False, step="infer",
                  stop_rule="max-batch", stop_reason="stopped growing at the max-batch bound 4: larger batches may fit",
                  memory_cap_bytes=2 * 1024**3, allocator_before_bytes=None, allocator_after_bytes=None,
                  notes=["a note"], measurement=SimpleNamespace(iters=10, fits=True),
                  limit_text=lambda: "not searched past 4: stopped by max-batch",
                  time_text=lambda: "1.8 s of the 120 s budget",
                  points=[SimpleNamespace(batch=2, latency_ms=0.8031, samples_per_s=2490.1, seconds=0.04, fits=True),
                          SimpleNamespace(batch=4, latency_ms=0.8912, samples_per_s=4487.1, seconds=0.05, fits=True)])
    result.update(changes)
    return SimpleNamespace(**result)


def test_a_batch_search_says_its_best_batch_limit_and_stop_rule_once_for_the_cli_and_the_pane():
    from torchperf_tui.wording import bold
    from torchperf_tui.wording.throughput import (best_text, fits_text, limit_row, point_cells, stopped_by_row,
                                                  throughput_rows, throughput_title, try_line)

    result = _search()
    assert throughput_title(result) == "tiny on cpu, sample 3x16x16 float32"
    rows = throughput_rows(result)
    assert [label for label, _, _ in rows] == ["best throughput", "latency at that batch", "largest batch that fits",
                                              "stopped by", "search took", "memory cap", "allocator before / after",
                                              "note"]
    assert rows[0][1] == "4911.2 samples/s at batch 4 (10 iterations; its search try: 4487.1)"
    assert rows[1][1] == "0.822 ms" and rows[5][1] == "2.0 GiB" and rows[6][1] == "n/a / n/a"
    assert best_text(result, bold) == "[b]4911.2[/] samples/s at batch [b]4[/]"
    assert limit_row(result) == ("largest batch that fits", "not searched past 4: stopped by max-batch", "")
    assert stopped_by_row(result, bold, lambda text: text.upper())[1] == \
        "[b]max-batch[/]: STOPPED GROWING AT THE MAX-BATCH BOUND 4: LARGER BATCHES MAY FIT"
    assert stopped_by_row(_search(to_oom=True))[1].endswith("larger batches may fit (--to-oom: no plateau rule)")
    assert point_cells(result) == [("2", "0.803 ms", "2490.1", "0.0 s", ""), ("4", "0.891 ms", "4487.1", "0.1 s", "best")]
    # cancelled before its best batch was measured again: no "n/a at batch 0", the best of its short tries instead
    cancelled = _search(best_batch=0, samples_per_s=None, latency_ms=None, measurement=None)
    assert best_text(cancelled) == ("n/a: cancelled before the best batch was measured again (its tries' best: "
                                    "4487.1 samples/s at batch 4, a short try)")
    assert best_text(_search(best_batch=0, points=[])) == "n/a: cancelled before a batch fitted"
    trained = throughput_rows(_search(step="train (sgd)"))
    assert trained[0][:2] == ("each iteration", "a training step, train (sgd): the largest batch that fits is the "
                                                "largest that fits for training (activations kept for the backward, "
                                                "gradients, optimizer state)")
    fitted = SimpleNamespace(batch=4, phase="grow", fits=True, latency_ms=0.8912, samples_per_s=4487.14, seconds=0.04)
    assert try_line(fitted) == "batch     4 (grow): fits, 0.891 ms, 4487.1 samples/s (0.0 s)"
    refused = SimpleNamespace(batch=8, phase="grow", fits=False, reason="out of memory", seconds=None)
    assert fits_text(refused) == "does not fit: out of memory"
    assert try_line(refused) == "batch     8 (grow): does not fit: out of memory"


class _Flags:
    def describe(self, device, threads_used=None, default_threads=None, beside=None):
        return f"flags on {device}, {threads_used} threads"


def test_an_ab_row_says_each_flag_the_arms_differ_in_at_its_default_too():
    # On the H200, tf32=off against tf32=on read 'TF32 cuDNN=off' beside 'TF32 matmul=on': each the flag that left
    # PyTorch's default, which reads as two different flags changed.
    from torchperf_tui.engine.measurements.flags import Flags
    from torchperf_tui.wording.compare import arm_cells

    result = SimpleNamespace(device="cuda:0",
                             a=_arm("tf32=off", 11.8, flags=Flags(tf32_matmul=False, tf32_cudnn=False)),
                             b=_arm("tf32=on", 5.3, flags=Flags(tf32_matmul=True, tf32_cudnn=True)))
    assert [cells[2] for cells in arm_cells(result)] == ["TF32 matmul=off, TF32 cuDNN=off",
                                                          "TF32 matmul=on, TF32 cuDNN=on"]
    result.a.flags, result.b.flags = Flags(), Flags(cudnn_benchmark=True)
    assert [cells[2] for cells in arm_cells(result)] == ["cudnn.benchmark=off", "cudnn.benchmark=on"]


def _arm(spec, median, ci=None, **changes):
    arm = dict(spec=spec, flags=_Flags(), threads_used=1, threads_asked=None, dtype="float32", channels_last=False,
               shapes="fixed", median_ms=median, ci_low_ms=ci and ci[0], ci_high_ms=ci and ci[1], p90_ms=median,
               p99_ms=median, samples_ms=[median] * 60, blocks=[0] * 6, step="infer", conditions=None)
    arm.update(changes)
    return SimpleNamespace(**arm)


def test_an_ab_comparison_says_each_arm_once_for_the_cli_and_the_pane():
    from torchperf_tui.wording.compare import ab_title, arm_cells, arm_conditions, ci_text

    a = _arm("base", 6.1, ci=(6.05, 6.14), conditions=SimpleNamespace(short=lambda step, brief=False: f"{step} {brief}"))
    b = _arm("channels_last=true", 5.2, channels_last=True)
    result = SimpleNamespace(a=a, b=b, model="tiny", device="cpu", input_shape=(1, 3, 16, 16), order=[0] * 12,
                             step="train", optimizer="sgd", amp="bf16")
    assert ci_text(a) == "6.05 ms - 6.14 ms" and ci_text(b) is None
    assert ab_title(result) == ("tiny on cpu, input 1x3x16x16, each iteration a training step (sgd, every block from "
                                "the same weights), torch.autocast bf16: A and B interleaved in 12 randomised blocks")
    assert arm_cells(result) == [
        ("A", "base", "flags on cpu, 1 threads", "6.10 ms", "6.05 ms - 6.14 ms", "6.10 ms", "6.10 ms?", "6"),
        ("B", "channels_last=true", "flags on cpu, 1 threads, channels_last", "5.20 ms", "-", "5.20 ms", "5.20 ms?", "6")]
    assert arm_conditions(result) == [("A", "infer False")]
    assert arm_conditions(result, brief=True) == [("A", "infer True")]


def _gpu():
    from torchperf_tui.engine.hardware.nvml import NA

    return SimpleNamespace(index=0, name="NVIDIA H100", compute_capability="9.0", sm_count=132,
                           total_memory_bytes=80 * 1024**3, l2_cache_bytes=50 * 1024**2, max_sm_clock_mhz=1980,
                           max_mem_clock_mhz=2619, memory_bus_width_bits=5120, power_limit_w=700.0,
                           peak_fp32_tflops=66.9, peak_fp16_tensor_tflops=989.4, peak_bf16_tensor_tflops=NA("no table"),
                           peak_bandwidth_gbs=3352.3, formulas={"peak FP32": "132 SMs x 128 x 2 x 1980 MHz"})


def test_the_device_report_says_each_figure_once_for_info_and_the_device_pane():
    from torchperf_tui.wording.device import cpu_rows, formula_lines, gpu_figures, gpu_rows, gpu_title, software_rows

    gpu = _gpu()
    assert gpu_title(gpu) == "GPU 0: NVIDIA H100"
    assert gpu_figures(gpu) == {
        "compute capability": "9.0", "SMs": "132", "memory": "80.0 GiB", "L2 cache": "50.0 MiB",
        "max SM clock": "1980 MHz", "max memory clock": "2619 MHz", "memory bus": "5120 bit", "power limit": "700 W",
        "PCIe link": "n/a (not probed)",
        "peak FP32": "66.9 TFLOP/s", "peak FP16 tensor": "989.4 TFLOP/s", "peak BF16 tensor": "n/a (no table)",
        "peak bandwidth": "3352 GB/s"}
    linked = SimpleNamespace(**{**vars(gpu), "pcie": "Gen5 x16 (max Gen5 x16)"})
    assert gpu_figures(linked)["PCIe link"] == "Gen5 x16 (max Gen5 x16) at the probe (lower when idle)"
    assert gpu_rows(gpu)[-1] == ("measured ceilings", "none measured yet: `torchperf-tui ceilings` measures them "
                                                      "(seconds) and keeps them", NORMAL)
    assert formula_lines(gpu) == ["peak FP32: 132 SMs x 128 x 2 x 1980 MHz"]
    report = SimpleNamespace(torch_version="2.9", cuda_runtime="13.0", cudnn_version="9.1", driver_version="580",
                             cuda_available=False, cuda_reason="no driver", nvml_available=True, nvml_reason=None)
    assert [(label, value) for label, value, _ in software_rows(report)] == [
        ("torch", "2.9"), ("CUDA runtime", "13.0"), ("cuDNN", "9.1"), ("driver", "580"),
        ("CUDA", "not available (no driver)"), ("NVML", "available")]
    cpu = SimpleNamespace(model="Xeon", physical_cores=2, logical_cores=4, freq_mhz=2100.4, ram_total_bytes=2 * 1024**3,
                          torch_threads=2, mkldnn_available=True)
    assert [(label, value) for label, value, _ in cpu_rows(cpu)][:6] == [
        ("model", "Xeon"), ("cores", "2 physical, 4 logical"), ("frequency", "2100 MHz"), ("RAM", "2.0 GiB"),
        ("torch threads", "2"), ("oneDNN (mkldnn)", "available")]


def test_measured_ceilings_say_their_kind_date_and_duration_once():
    import time

    from torchperf_tui.wording.ceilings import (ceiling_cells, ceiling_kind, ceilings_title, kept_ceilings_text,
                                                measured_when, took_text, tried_cells)

    at = time.mktime((2026, 11, 26, 10, 28, 0, 0, 0, -1))
    tried = [SimpleNamespace(workload="matmul 512", size="512", threads=2, reps=9, value=4.5e11, skipped=None),
             SimpleNamespace(workload="matmul 4096", size="4096", threads=None, reps=None, value=None, skipped="slow")]
    compute = SimpleNamespace(kind="compute", dtype="float32", workload="matmul 512", size="512", threads=2,
                              median_s=0.0012, text="0.45 TFLOP/s", tried=tried)
    copy = SimpleNamespace(kind="copy", dtype="float32", workload="copy", size="256 MiB", threads=None,
                           median_s=0.05, text="9.8 GB/s", tried=[])
    result = SimpleNamespace(device="cpu", key="cpu:xeon", measured_at=at, cached=False, seconds=12.34,
                             ceilings=[compute, copy], outdated="")
    assert measured_when(at) == "2026-11-26 10:28"
    assert (ceiling_kind(compute), ceiling_kind(copy)) == ("compute", "copy (read + write)")
    assert took_text(result) == " in 12.3 s" and took_text(SimpleNamespace(seconds=1.0, cached=True)) == ""
    assert ceilings_title(result) == "measured ceilings of cpu (cpu:xeon), 2026-11-26 10:28, measured now in 12.3 s"
    assert ceiling_cells(result) == [("compute", "float32", "matmul 512", "512", "2", "1.20 ms", "0.45 TFLOP/s"),
                                     ("copy (read + write)", "float32", "copy", "256 MiB", "–", "50.00 ms", "9.8 GB/s")]
    assert tried_cells(result) == [("float32", "matmul 512", "512", "2", "9", "0.450 TFLOP/s"),
                                   ("float32", "matmul 4096", "4096", "–", "–", "skipped: slow")]
    assert kept_ceilings_text(result) == ("float32 matmul 512 0.45 TFLOP/s · copy 9.8 GB/s "
                                          "(measured 2026-11-26 10:28)")


def test_a_models_complexity_says_its_counts_once_for_flops_and_the_layers_pane():
    from torchperf_tui.wording.complexity import (complexity_rows, complexity_title, counts_backward, layer_cells,
                                                  layer_figures, step_ratio)

    conv = SimpleNamespace(name="conv1", type="Conv2d", input_shape=(1, 3, 32, 32), output_shape=(1, 64, 16, 16),
                           params=9408, flops=4_816_896, output_bytes=65536, backward_flops=9_633_792)
    cx = SimpleNamespace(model="resnet18", input_shape=(1, 3, 32, 32), dtype="float32", params_total=11_689_512,
                         params_trainable=11_689_512, size_bytes=46_757_888, size_mb=44.59, flops=1_820_000_000, macs=910_000_000,
                         backward_flops=3_640_000_000, step_flops=5_460_000_000, layers=[conv])
    assert counts_backward(cx) and step_ratio(cx) == "3.00x"
    assert complexity_title(cx) == "resnet18 at 1x3x32x32 (float32)"
    assert [(label, value) for label, value, _ in complexity_rows(cx)] == [
        ("parameters", "11.7 M (11,689,512), trainable 11.7 M"), ("size", "44.6 MiB"),
        ("FLOPs", "1.82 GFLOPs (1,820,000,000)"), ("MACs", "910.0 MMACs (910,000,000)"),
        ("training step", "forward 1.82 GFLOPs + backward 3.64 GFLOPs = 5.46 GFLOPs (3.00x the forward; the "
                          "optimizer's update not counted)")]
    assert layer_figures(conv, training=True) == {"params": "9.41 k", "FLOPs": "4.82 M", "bwd FLOPs": "9.63 M",
                                                  "output bytes": "64.0 KiB"}
    assert layer_cells(cx) == [("conv1", "Conv2d", "1x3x32x32", "1x64x16x16", "9.41 k", "4.82 M", "9.63 M", "64.0 KiB")]
    forward = SimpleNamespace(**{**vars(cx), "backward_flops": None})
    assert step_ratio(forward) is None and len(complexity_rows(forward)) == 4
    assert "bwd FLOPs" not in layer_figures(conv, training=False)


def test_a_profile_says_an_operators_share_and_its_trace_once():
    from torchperf_tui.wording.profile import op_cells, op_columns, profile_rows, profile_title, share_text, trace_text

    op = SimpleNamespace(name="aten::conv2d", calls=2, self_cpu_ms=1.5, cpu_total_ms=2.25, self_device_ms=0.5,
                         device_total_ms=0.75, self_cpu_memory_bytes=0, self_device_memory_bytes=2048,
                         input_shapes="[[1, 3, 8, 8]]")
    result = SimpleNamespace(model="tiny", device="cuda:0", input_shape=(1, 3, 8, 8), dtype="float32", iters=5,
                             activities=["cpu", "cuda"], sort_by="self_device", total_self_cpu_ms=3.0,
                             total_self_device_ms=2.0, notes=["a note"], share_pct=lambda op: 25.0)
    assert share_text(result, op) == "25.0" and share_text(result, op, " %") == "25.0 %"
    assert trace_text("/tmp/t.json") == "trace: /tmp/t.json (open it in https://ui.perfetto.dev or chrome://tracing)"
    assert trace_text("/tmp/t.json", compact=True) == "Chrome trace: /tmp/t.json (open in ui.perfetto.dev)"
    assert trace_text(None, compact=True) == "no trace written (no iteration was recorded)"
    assert profile_title(result) == "tiny on cuda:0, input 1x3x8x8 float32"
    assert [(label, value) for label, value, _ in profile_rows(result)] == [
        ("profiled", "5 iterations (cpu, cuda)"), ("sorted by", "self_device"), ("self CPU total", "3.00 ms"),
        ("self GPU total", "2.00 ms"), ("note", "a note")]
    assert op_columns(result)[4:6] == ["self GPU", "GPU total"]
    assert op_cells(result, op) == ["aten::conv2d", "2", "1.50 ms", "2.25 ms", "500 µs", "750 µs", "25.0 %", "2.0 KiB",
                                    "[[1, 3, 8, 8]]"]


def test_the_kernels_per_layer_say_what_ran_and_what_changed_once():
    from torchperf_tui.wording.kernels import changed_text, kernels_title, ran_text, shows_step, us_text, what_ran

    kernels = [SimpleNamespace(name=f"k{i}", us_per_iter=1000.0 * (5 - i)) for i in range(5)]
    names = {k.name: k.name.upper() for k in kernels}
    assert ran_text(kernels, names) == "K0 5,000 us\nK1 4,000 us\nK2 3,000 us\n+2 more"
    assert ran_text(kernels[:1], names) == "K0" and ran_text([], names) == "(nothing recorded)"
    assert ran_text(kernels, names, compact=True) == "K0 +4" and ran_text([], names, compact=True) == "–"
    assert us_text(1234.4) == "1,234"
    result = SimpleNamespace(kind="cuda-kernel", layers=[0, 1, 2], changed_layers=[1], training=True, amp=None,
                             model="resnet18", device="cuda:0", input_shape=(8, 3, 224, 224), step="train (sgd)",
                             iters=3)
    assert what_ran(result) == "GPU kernels" and changed_text(result) == "1 of 3 conv layers changed what they ran"
    assert shows_step(result) and not shows_step(SimpleNamespace(training=False, amp=None))
    assert kernels_title(result) == ("resnet18 on cuda:0, input 8x3x224x224, each iteration train (sgd): GPU kernels "
                                     "per conv layer and pass, per iteration (3 profiled)")
    assert what_ran(SimpleNamespace(kind="aten")) == "ATen conv implementation"


def test_a_disturbed_arms_kernel_times_are_marked_in_the_clis_rows_and_its_marks_said_once():
    # `compare --kernels` prints the marks under its tables; each row's time of the disturbed arm carries the mark,
    # as the pane's do (a busy host lengthens an arm's times, not which kernel ran).
    from torchperf_tui.engine.analysis.kernel_time import KernelTime
    from torchperf_tui.engine.analysis.kernels import KernelComparison, LayerKernels
    from torchperf_tui.engine.hardware.host_noise import HostNoise
    from torchperf_tui.wording.kernels import disturbed_arms, kernel_cells, kernels_marks_text

    busy = HostNoise(cores=2, load_start=6.0, load_end=7.0, window_s=3.0, other_busy_cores=1.5, samples=10,
                     during="its profiled passes")
    layer = LayerKernels("conv1", [KernelTime("k", 1234.0, 1)], [KernelTime("k", 1000.0, 1)])
    result = KernelComparison(model="m", device="cpu", input_shape=(1, 3, 8, 8), a_spec="A", b_spec="B",
                              layers=[layer], kind="cpu-op", note="", iters=3, arm_hosts={"B": busy})
    assert disturbed_arms(result) == {"B"}
    assert kernel_cells(result)[0][3:5] == ("1,234", "1,000 !")
    assert kernels_marks_text(result, compact=True) == "! disturbed: arm B: noisy host"
    result.arm_hosts = {}
    assert kernel_cells(result)[0][3:5] == ("1,234", "1,000") and kernels_marks_text(result) == ""
    result.app_marks = ["window resized during the run"]  # what the app saw beside them marks both arms
    assert kernel_cells(result)[0][3:5] == ("1,234 !", "1,000 !")


def test_a_runs_compile_shapes_and_intervals_are_worded_in_one_place_for_the_cli_and_the_timing_pane():
    from torchperf_tui.wording.timing import (compile_line_rows, compile_rows, intervals_by_name, intervals_line,
                                              percentile_cell, shapes_line)

    compiled = SimpleNamespace(compile_mode="default", compiled=True, compile_s=12.34, compile_error=None)
    failed = SimpleNamespace(compile_mode="default", compiled=False, compile_s=None, compile_error="no C++ compiler")
    assert compile_rows(compiled) == [("torch.compile", "mode default, compiled in 12.3 s", NORMAL)]
    assert compile_rows(failed) == [("torch.compile", "FAILED, eager numbers shown: no C++ compiler", WARNING)]
    assert compile_rows(SimpleNamespace(compile_mode=None)) == []
    assert compile_line_rows("default", None) == [("torch.compile mode default", "compiling before the timed "
                                                                                 "iterations…", NORMAL)]
    assert compile_line_rows("default", compiled) == [("torch.compile mode default",
                                                       "compiled in 12.3 s (not in the samples)", NORMAL)]
    assert compile_line_rows("default", failed) == [("torch.compile failed, eager numbers shown", "no C++ compiler",
                                                     WARNING)]
    assert compile_line_rows(None, compiled) == []
    report = SimpleNamespace(tuning_cost_ms=12.5, unrepeated=34)
    assert shapes_line("random", [4.0, 6.0], [30.0], report) == (
        "shapes random: 1 new-shape iteration(s) p50 30.00 ms · 2 repeat(s) p50 5.00 ms · tuning cost 12.50 ms "
        "(34 shape(s) never repeated)")
    assert shapes_line("random", [], [], None) == "shapes random: 0 new-shape iteration(s) p50 n/a · 0 repeat(s) p50 n/a"
    intervals = intervals_by_name([float(i) for i in range(50)])
    assert list(intervals) == ["p50", "p90", "p99"]
    assert percentile_cell(intervals, "p99", 49.0, "$warning") == "49.00 ms[$warning]?[/]"
    assert percentile_cell(intervals, "p50", 24.5) == "24.50 ms"
    assert intervals_line(intervals).startswith("95 % CI  p50 ") and intervals_line(intervals).endswith(
        "p99? not supported by 50 samples, needs 555")
    assert intervals_line({}) == ""


def test_every_cli_heading_names_the_model_device_and_input_one_way():
    from torchperf_tui.wording import subject
    from torchperf_tui.wording.timing import timing_title

    result = SimpleNamespace(model="resnet18", device="cpu", input_shape=(1, 3, 224, 224), dtype="float32",
                             channels_last=True)
    assert subject(result) == "resnet18 on cpu, input 1x3x224x224 float32"
    assert subject(result, dtype=False) == "resnet18 on cpu, input 1x3x224x224"
    assert timing_title(result) == "resnet18 on cpu, input 1x3x224x224 float32 channels_last"


def test_a_heading_names_the_overrides_the_sequence_length_each_input_and_random_weights():
    from torchperf_tui.wording import subject

    result = SimpleNamespace(model="hf:gpt2", device="cpu", input_shape=(1, 128), dtype="float32",
                             model_args="n_layer=2", seq_len=128,
                             inputs="input_ids 1x128 int64 (ids < 50,257), attention_mask 1x128 int64 (all ones)")
    assert subject(result) == ("hf:gpt2 (n_layer=2) on cpu, float32, sequence length 128: input_ids 1x128 int64 "
                               "(ids < 50,257), attention_mask 1x128 int64 (all ones); random weights (nothing "
                               "downloaded)")
    timm = SimpleNamespace(model="timm:convnext_atto", device="cpu", input_shape=(1, 3, 224, 224), dtype="float32")
    assert subject(timm) == "timm:convnext_atto on cpu, input 1x3x224x224 float32; random weights (nothing downloaded)"


def test_a_frontier_under_p99_shows_the_median_and_the_quantile_and_under_p50_one_column():
    from torchperf_tui.core.slo import parse_slo
    from torchperf_tui.wording.throughput import slo_columns, slo_point_cells, slo_point_line

    point = SimpleNamespace(batch=4, p50_ms=0.2, quantile=SimpleNamespace(value_ms=0.5, supported=False),
                            items_per_s=100.0, goodput_per_s=90.0, n=555, verdict="meets")
    p99, p50 = parse_slo("p99=20ms"), parse_slo("p50=20ms")
    assert [heading for _, heading in slo_columns(p99)] == ["batch", "p50", "p99", "items/s", "goodput/s", "passes",
                                                           "verdict"]
    assert slo_point_cells(point, p99, chosen=4) == ("4", "200 µs", "500 µs?", "100.0", "90.0", "555", "meets, chosen")
    assert [heading for _, heading in slo_columns(p50)] == ["batch", "p50", "items/s", "goodput/s", "passes",
                                                           "verdict"]
    assert slo_point_cells(point, p50) == ("4", "500 µs?", "100.0", "90.0", "555", "meets")
    point = SimpleNamespace(**{**vars(point), "label": "batch 4 (grow)", "host_noise": None, "quantile": SimpleNamespace(
        value_ms=0.5, low_ms=0.4, high_ms=0.6, supported=True)})
    assert slo_point_line(point, p99).startswith("batch 4 (grow): p50 200 µs · p99 500 µs (CI 400 µs-600 µs) · ")
    assert slo_point_line(point, p50).startswith("batch 4 (grow): p50 500 µs (CI 400 µs-600 µs) · 100.0 items/s")
