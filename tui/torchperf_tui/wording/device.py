"""The device report (engine.hardware.device.DeviceReport) in words: each figure of the software, a GPU and the CPU
said once, as the CLI's rows of `info` and as the figures the device pane packs into its lines."""

from __future__ import annotations

from torchperf_tui.core.formatting import format_bytes, format_number
from torchperf_tui.wording import Row, row
from torchperf_tui.wording.ceilings import kept_ceilings_text


def available(flag) -> str:
    return "available" if flag else "not available"


def version_rows(report) -> list[Row]:
    """torch, and the CUDA runtime, cuDNN and the driver beside it."""
    return [row("torch", report.torch_version), row("CUDA runtime", report.cuda_runtime),
            row("cuDNN", report.cudnn_version), row("driver", report.driver_version)]


def software_rows(report) -> list[Row]:
    """`info`'s Software: the versions, then whether CUDA and NVML answer, and why not."""
    return version_rows(report) + [
        row("CUDA", available(True) if report.cuda_available else f"not available ({report.cuda_reason})"),
        row("NVML", available(True) if report.nvml_available else f"not available ({report.nvml_reason})")]


def gpu_title(gpu) -> str:
    return f"GPU {gpu.index}: {gpu.name}"


def pcie_text(link) -> str:
    """The PCIe link in words: 'Gen5 x16 (max Gen5 x16)', 'n/a (why)'; an idle GPU's link reads lower than under
    load, which a run's conditions say."""
    if link is None:
        return "n/a (not probed)"
    reason = getattr(link, "reason", None)
    return f"n/a ({reason})" if reason is not None else f"{link} at the probe (lower when idle)"


def gpu_figures(gpu) -> dict[str, str]:
    """A GPU's figures by their label: what it is, its memory and clocks, its datasheet peaks."""
    return {"compute capability": str(gpu.compute_capability), "SMs": format_number(gpu.sm_count),
            "memory": format_bytes(gpu.total_memory_bytes), "L2 cache": format_bytes(gpu.l2_cache_bytes),
            "max SM clock": format_number(gpu.max_sm_clock_mhz, "MHz"),
            "max memory clock": format_number(gpu.max_mem_clock_mhz, "MHz"),
            "memory bus": format_number(gpu.memory_bus_width_bits, "bit"),
            "power limit": format_number(gpu.power_limit_w, "W"),
            "PCIe link": pcie_text(getattr(gpu, "pcie", None)),
            "peak FP32": format_number(gpu.peak_fp32_tflops, "TFLOP/s", 1),
            "peak FP16 tensor": format_number(gpu.peak_fp16_tensor_tflops, "TFLOP/s", 1),
            "peak BF16 tensor": format_number(gpu.peak_bf16_tensor_tflops, "TFLOP/s", 1),
            "peak bandwidth": format_number(gpu.peak_bandwidth_gbs, "GB/s")}


def gpu_rows(gpu, kept=None) -> list[Row]:
    """`info`'s rows of a GPU: its figures, then its measured ceilings as kept (`kept`) or how to measure them."""
    return [row(label, value) for label, value in gpu_figures(gpu).items()] + \
        [row("measured ceilings", kept_ceilings_text(kept))]


def formula_lines(gpu) -> list[str]:
    """How each datasheet peak was derived: 'peak FP32: 132 SMs x 128 FMA x 2 x 1980 MHz'."""
    return [f"{name}: {formula}" for name, formula in (gpu.formulas or {}).items()]


def cpu_figures(cpu) -> dict[str, str]:
    """The CPU's figures by their label (its model and cores are said in each front end's own way)."""
    return {"frequency": format_number(cpu.freq_mhz, "MHz"), "RAM": format_bytes(cpu.ram_total_bytes),
            "torch threads": format_number(cpu.torch_threads), "oneDNN (mkldnn)": available(cpu.mkldnn_available)}


def cpu_rows(cpu, kept=None) -> list[Row]:
    """`info`'s rows of the CPU: its model, cores and figures, that no datasheet peak stands for it, its measured
    ceilings as kept (`kept`) or how to measure them."""
    return [row("model", cpu.model), row("cores", f"{cpu.physical_cores} physical, {cpu.logical_cores} logical"),
            *(row(label, value) for label, value in cpu_figures(cpu).items()),
            row("peak FLOP/s, bandwidth", "no datasheet figure for a CPU: the measured ceilings stand in for them"),
            row("measured ceilings", kept_ceilings_text(kept))]


def short_name(report, device: str) -> str:
    """'NVIDIA H100 … (cuda:0)' or 'CPU: model' for the header."""
    if device.startswith("cuda"):
        index = int(device.split(":")[1]) if ":" in device else 0
        gpu = next((g for g in report.gpus if g.index == index), None)
        return f"{gpu.name if gpu else 'CUDA'} ({device})"
    return f"CPU: {report.cpu.model}"
