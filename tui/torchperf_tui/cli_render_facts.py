"""The CLI's facts that no timing gives: the device (`info`), its measured ceilings (`ceilings`), the model
catalogue (`models`) and a model's size and FLOPs (`flops`). Text only: no measurement here."""

from __future__ import annotations

import time
from itertools import groupby

from rich.table import Table

from torchperf_tui.cli_render import console, print_kv
from torchperf_tui.formatting import format_bytes, format_count, format_flops, format_ms, format_shape


def _tflops(value) -> str:
    return f"{value:.1f} TFLOPS" if isinstance(value, (int, float)) else str(value)


def kept_ceilings_text(kept) -> str:
    """A device's measured ceilings as kept ('float32 conv2d 3x3 0.45 TFLOP/s · copy 12.1 GB/s, measured ...'),
    or how to measure them."""
    if kept is None or not kept.ceilings:
        return "none measured yet: `torchperf-tui ceilings` measures them (seconds) and keeps them"
    when = time.strftime("%Y-%m-%d %H:%M", time.localtime(kept.measured_at))
    parts = [f"{c.dtype} {c.workload} {c.text}" if c.kind == "compute" else f"copy {c.text}" for c in kept.ceilings]
    outdated = f"; {kept.outdated}" if kept.outdated else ""
    return " · ".join(parts) + f" (measured {when}{outdated})"


def render_device_report(report, kept: dict | None = None) -> None:
    """`info`; `kept`: the measured ceilings kept per device ("cpu", "cuda:0"), None where there are none."""
    kept = kept or {}
    print_kv("Software", [
        ("torch", report.torch_version),
        ("CUDA runtime", report.cuda_runtime),
        ("cuDNN", report.cudnn_version),
        ("driver", report.driver_version),
        ("CUDA", "available" if report.cuda_available else f"not available ({report.cuda_reason})"),
        ("NVML", "available" if report.nvml_available else f"not available ({report.nvml_reason})"),
    ])
    for gpu in report.gpus:
        console.print()
        print_kv(f"GPU {gpu.index}: {gpu.name}", [
            ("compute capability", gpu.compute_capability),
            ("SMs", gpu.sm_count),
            ("memory", format_bytes(gpu.total_memory_bytes)),
            ("L2 cache", format_bytes(gpu.l2_cache_bytes)),
            ("max SM clock", f"{gpu.max_sm_clock_mhz} MHz" if isinstance(gpu.max_sm_clock_mhz, int)
             else gpu.max_sm_clock_mhz),
            ("max memory clock", f"{gpu.max_mem_clock_mhz} MHz" if isinstance(gpu.max_mem_clock_mhz, int)
             else gpu.max_mem_clock_mhz),
            ("memory bus", f"{gpu.memory_bus_width_bits} bit" if isinstance(gpu.memory_bus_width_bits, int)
             else gpu.memory_bus_width_bits),
            ("power limit", f"{gpu.power_limit_w:.0f} W" if isinstance(gpu.power_limit_w, (int, float))
             else gpu.power_limit_w),
            ("peak FP32", _tflops(gpu.peak_fp32_tflops)),
            ("peak FP16 tensor", _tflops(gpu.peak_fp16_tensor_tflops)),
            ("peak BF16 tensor", _tflops(gpu.peak_bf16_tensor_tflops)),
            ("peak bandwidth", f"{gpu.peak_bandwidth_gbs:.0f} GB/s"
             if isinstance(gpu.peak_bandwidth_gbs, (int, float)) else gpu.peak_bandwidth_gbs),
            ("measured ceilings", kept_ceilings_text(kept.get(f"cuda:{gpu.index}"))),
        ])
        for name, formula in gpu.formulas.items():
            console.print(f"  {name}: {formula}")
    cpu = report.cpu
    console.print()
    print_kv("CPU", [
        ("model", cpu.model),
        ("cores", f"{cpu.physical_cores} physical, {cpu.logical_cores} logical"),
        ("frequency", f"{cpu.freq_mhz:.0f} MHz" if isinstance(cpu.freq_mhz, (int, float)) else cpu.freq_mhz),
        ("RAM", format_bytes(cpu.ram_total_bytes)),
        ("torch threads", cpu.torch_threads),
        ("oneDNN (mkldnn)", "available" if cpu.mkldnn_available else "not available"),
        ("peak FLOP/s, bandwidth", "no datasheet figure for a CPU: the measured ceilings stand in for them"),
        ("measured ceilings", kept_ceilings_text(kept.get("cpu"))),
    ])


def render_catalogue(entries) -> None:
    table = Table(title=f"{len(entries)} models (weights=None: nothing is downloaded)", title_justify="left")
    table.add_column("task")
    table.add_column("model")
    table.add_column("input (no batch)")
    table.add_column("note")
    for task, group in groupby(sorted(entries, key=lambda e: (e.task, e.name)), key=lambda e: e.task):
        for i, entry in enumerate(group):
            table.add_row(task if i == 0 else "", entry.name, format_shape(entry.input_shape),
                          "" if entry.supported else f"not supported: {entry.reason}")
    console.print(table)


def render_complexity(result, layers: bool = False) -> None:
    print_kv(f"{result.model} at {format_shape(result.input_shape)} ({result.dtype})", [
        ("parameters", f"{format_count(result.params_total)} ({result.params_total:,}), "
                       f"trainable {format_count(result.params_trainable)}"),
        ("size", f"{result.size_mb:.2f} MiB"),
        ("FLOPs", f"{format_flops(result.flops)} ({result.flops:,})"),
        ("MACs", f"{format_count(result.macs, 'MACs')} ({result.macs:,})"),
        *([("training step", f"forward {format_flops(result.flops)} + backward {format_flops(result.backward_flops)}"
                             f" = {format_flops(result.step_flops)} ({result.step_flops / result.flops:.2f}x the "
                             "forward; the optimizer's update not counted)")]
          if getattr(result, "backward_flops", None) is not None and result.flops else []),
    ])
    if not layers:
        return
    training = getattr(result, "backward_flops", None) is not None
    table = Table(box=None, header_style="bold")
    numeric = ("params", "FLOPs", "bwd FLOPs")
    for column in ("layer", "type", "input", "output", "params", "FLOPs", *(("bwd FLOPs",) if training else ()),
                   "output"):
        table.add_column(column, justify="right" if column in numeric else "left", no_wrap=True)
    for layer in result.layers:
        backward = (format_count(layer.backward_flops or 0),) if training else ()
        table.add_row(layer.name, layer.type, format_shape(layer.input_shape),
                      format_shape(layer.output_shape), format_count(layer.params),
                      format_count(layer.flops), *backward, format_bytes(layer.output_bytes))
    console.print()
    console.print("per layer", style="bold underline")
    console.print(table)


def render_ceilings(result) -> None:
    """`ceilings`: each measured ceiling with the workload that gave it, every workload tried, where they are kept."""
    table = Table(box=None, header_style="bold")
    for column in ("ceiling", "dtype", "best of", "size", "threads", "median", "reached"):
        table.add_column(column, justify="right" if column in ("threads", "median", "reached") else "left")
    for c in result.ceilings:
        table.add_row("compute" if c.kind == "compute" else "copy (read + write)", c.dtype, c.workload, c.size,
                      str(c.threads or "–"), format_ms(c.median_s * 1e3), c.text)
    when = time.strftime("%Y-%m-%d %H:%M", time.localtime(result.measured_at))
    took = f" in {result.seconds:.1f} s" if result.seconds is not None and not result.cached else ""
    console.print(f"measured ceilings of {result.device} ({result.key}), {when}"
                  + (", kept from before (--refresh measures again)" if result.cached else f", measured now{took}"),
                  style="bold underline")
    console.print(table)
    if result.outdated:
        console.print(f"these were {result.outdated}", markup=False)
    tried = [(c, t) for c in result.ceilings for t in c.tried]
    if tried:
        console.print()
        console.print("workloads tried (the best of each dtype is its ceiling)", style="bold underline")
        rows = Table(box=None, header_style="bold")
        for column in ("dtype", "workload", "size", "threads", "reps", "reached"):
            rows.add_column(column, justify="right" if column in ("threads", "reps") else "left")
        for c, t in tried:
            if t.value is None:
                reached = f"skipped: {t.skipped}"
            else:
                reached = f"{t.value / 1e12:.3f} TFLOP/s" if c.kind == "compute" else f"{t.value / 1e9:.1f} GB/s"
            rows.add_row(c.dtype, t.workload, t.size, str(t.threads or "–"), str(t.reps or "–"), reached)
        console.print(rows)
    if result.path:
        console.print(f"kept in {result.path}; roofline and MFU are given against them too")
