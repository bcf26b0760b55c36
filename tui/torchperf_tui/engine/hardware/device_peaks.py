"""Datasheet peaks of a GPU: the per-architecture table and the arithmetic that turns clocks and SM counts into
theoretical FP32, tensor and bandwidth peaks, each with its formula shown.

Pure arithmetic on figures the probe read (engine/hardware/device.py): no torch, no NVML here.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from torchperf_tui.engine.hardware.nvml import NA
from torchperf_tui.core.formatting import is_positive_number


@dataclasses.dataclass(frozen=True)
class ArchSpec:
    """Per-SM throughput of one compute capability, from NVIDIA's architecture whitepapers."""

    name: str
    fp32_cores_per_sm: int
    # Dense FP16 tensor FLOP per clock per SM at full rate (FP32 accumulate on data-centre and pro parts).
    tensor_flops_per_clk_sm: int
    bf16_tensor: bool
    # GeForce parts of these generations run FP16 tensor math with FP32 accumulate (what PyTorch uses)
    # at half rate, per the Turing/GA102/AD102 whitepapers.
    geforce_half_rate: bool = False


# Check: A100 (8.0): 1410 MHz x 108 SMs x 64 x 2 = 19.5 TFLOPS FP32; x 2048 = 311.9 TFLOPS FP16/BF16.
#        H100 SXM (9.0): 1980 MHz x 132 x 128 x 2 = 66.9 TFLOPS FP32; 1830 MHz x 132 x 4096 = 989.4 TFLOPS.
#        V100 SXM2 (7.0): 1530 MHz x 80 x 64 x 2 = 15.7 TFLOPS; x 1024 = 125.3 TFLOPS FP16.
#        T4 (7.5): 1590 MHz x 40 x 64 x 2 = 8.1 TFLOPS; x 1024 = 65.1 TFLOPS FP16.
#        A10 (8.6): 1695 MHz x 72 x 128 x 2 = 31.2 TFLOPS; x 1024 = 125 TFLOPS.
#        L40S (8.9): 2520 MHz x 142 x 128 x 2 = 91.6 TFLOPS; x 1024 = 366 TFLOPS.
ARCH_SPECS: dict[tuple[int, int], ArchSpec] = {
    (7, 0): ArchSpec("Volta", 64, 1024, bf16_tensor=False),
    (7, 5): ArchSpec("Turing", 64, 1024, bf16_tensor=False, geforce_half_rate=True),
    (8, 0): ArchSpec("Ampere (GA100)", 64, 2048, bf16_tensor=True),
    (8, 6): ArchSpec("Ampere (GA10x)", 128, 1024, bf16_tensor=True, geforce_half_rate=True),
    (8, 9): ArchSpec("Ada Lovelace", 128, 1024, bf16_tensor=True, geforce_half_rate=True),
    (9, 0): ArchSpec("Hopper", 128, 4096, bf16_tensor=True),
}

# NVIDIA quotes Hopper tensor peaks at a lower clock than its FP32 peak (power-limited under tensor load):
# H100 SXM / H200 / GH200 (132 SMs): 1830 MHz -> 989.4 TFLOPS; H100 PCIe (114 SMs): 1620 MHz -> 756 TFLOPS.
# Keyed by (compute capability, SM count); every other part uses its max SM clock.
DATASHEET_TENSOR_CLOCK_MHZ: dict[tuple[int, int, int], int] = {
    (9, 0, 132): 1830,
    (9, 0, 114): 1620,
}


# NVLink, GB/s each way per link, by the compute capability's major (NVIDIA's datasheets: P100 4 links x 20 = 80 GB/s
# each way; V100 6 x 25 = 150; A100 12 x 25 = 300; H100 SXM 18 x 25 = 450; B200 18 x 50 = 900). Not from NVML's link
# version, whose numbering changed between drivers (a major number, then an enum with 2.2 and 3.1 in it).
NVLINK_GBS_PER_LINK: dict[int, float] = {6: 20.0, 7: 25.0, 8: 25.0, 9: 25.0, 10: 50.0}

# PCIe, by generation: GT/s per lane and the share of it the line code leaves for data (PCI-SIG: 8b/10b for
# generations 1-2, 128b/130b for 3-5, FLIT mode's 242/256 for 6).
PCIE_LANE: dict[int, tuple[float, float]] = {1: (2.5, 8 / 10), 2: (5.0, 8 / 10), 3: (8.0, 128 / 130),
                                             4: (16.0, 128 / 130), 5: (32.0, 128 / 130), 6: (64.0, 242 / 256)}


def nvlink_gbs(compute_capability: tuple[int, int] | str | NA, links: int | NA) -> float | NA:
    """A GPU's NVLink peak, GB/s each way: its active links x its architecture's rate per link."""
    if isinstance(links, NA):
        return links
    cc = _parse_cc(compute_capability)
    if cc is None:
        return _first_na(compute_capability, default="compute capability unknown")
    if cc[0] not in NVLINK_GBS_PER_LINK:
        return NA(f"no NVLink rate for sm_{cc[0]}{cc[1]} in the table")
    return links * NVLINK_GBS_PER_LINK[cc[0]]


def pcie_gbs(generation: int | NA, width: int | NA) -> float | NA:
    """A PCIe link's peak, GB/s each way: GT/s per lane x its code's efficiency x lanes / 8 bits."""
    if isinstance(generation, NA) or isinstance(width, NA):
        return _first_na(generation, width, default="PCIe link unknown")
    if generation not in PCIE_LANE:
        return NA(f"PCIe generation {generation} not in the table")
    rate, efficiency = PCIE_LANE[generation]
    return rate * efficiency * width / 8


@dataclasses.dataclass
class PeakFigures:
    fp32_tflops: float | NA
    fp16_tensor_tflops: float | NA
    bf16_tensor_tflops: float | NA
    bandwidth_gbs: float | NA
    formulas: dict[str, str]


def _parse_cc(compute_capability: str | tuple[int, int] | NA) -> tuple[int, int] | None:
    if isinstance(compute_capability, tuple):
        return compute_capability
    if isinstance(compute_capability, str) and "." in compute_capability:
        major, minor = compute_capability.split(".", 1)
        if major.isdigit() and minor.isdigit():
            return int(major), int(minor)
    return None


def _first_na(*values: Any, default: str) -> NA:
    """The reason a formula input is missing: the first NA among them, else `default`."""
    for value in values:
        if isinstance(value, NA):
            return value
    return NA(default)


def peak_figures(compute_capability: str | tuple[int, int] | NA, sm_count: int | NA,
                 max_sm_clock_mhz: float | NA, max_mem_clock_mhz: float | NA,
                 memory_bus_width_bits: int | NA, name: str | NA = "",
                 clock_source: str = "NVML", mem_source: str = "NVML") -> PeakFigures:
    """Theoretical peaks from clocks, SM count and the per-architecture table, each with its formula.

    FP32 = max SM clock x SMs x FP32 cores/SM x 2 (an FMA is two FLOPs).
    Tensor = clock x SMs x dense tensor FLOP/clk/SM.
    Bandwidth = max memory clock x bus width / 8 x 2 (double data rate, as NVML reports the clock).
    """
    formulas: dict[str, str] = {}
    cc = _parse_cc(compute_capability)
    cc_text = f"sm_{cc[0]}{cc[1]}" if cc else "this GPU"
    spec = ARCH_SPECS.get(cc) if cc else None
    clock_label = "max SM clock" + ("" if clock_source == "NVML" else f" from {clock_source}")

    fp32: float | NA
    fp16: float | NA
    bf16: float | NA
    if cc is None:
        fp32 = fp16 = bf16 = NA("unknown compute capability")
    elif spec is None:
        fp32 = NA(f"unknown cores/SM for {cc_text}")
        fp16 = bf16 = NA(f"unknown tensor FLOP/clk/SM for {cc_text}")
    elif not (is_positive_number(max_sm_clock_mhz) and is_positive_number(sm_count)):
        fp32 = fp16 = bf16 = _first_na(max_sm_clock_mhz, sm_count, default="max SM clock or SM count unknown")
    else:
        clock = float(max_sm_clock_mhz)
        fp32 = clock * 1e6 * sm_count * spec.fp32_cores_per_sm * 2 / 1e12
        formulas["fp32"] = (f"{clock:.0f} MHz ({clock_label}) x {sm_count} SMs x {spec.fp32_cores_per_sm} "
                            f"FP32 cores x 2 = {fp32:.1f} TFLOP/s")
        tensor_clock = clock
        clock_note = clock_label
        datasheet = DATASHEET_TENSOR_CLOCK_MHZ.get((cc[0], cc[1], int(sm_count)))
        if datasheet is not None and datasheet < clock:
            tensor_clock = float(datasheet)
            clock_note = f"NVIDIA's datasheet clock for tensor work; {clock_label} {clock:.0f} MHz"
        per_sm = spec.tensor_flops_per_clk_sm
        rate_note = ""
        if spec.geforce_half_rate and isinstance(name, str) and "geforce" in name.lower():
            per_sm //= 2
            rate_note = ", half rate: GeForce with FP32 accumulate"
        fp16 = tensor_clock * 1e6 * sm_count * per_sm / 1e12
        formulas["fp16_tensor"] = (f"{tensor_clock:.0f} MHz ({clock_note}) x {sm_count} SMs x {per_sm} dense "
                                   f"FLOP/clk/SM{rate_note} = {fp16:.1f} TFLOP/s")
        if spec.bf16_tensor:
            bf16 = fp16
            formulas["bf16_tensor"] = formulas["fp16_tensor"].replace(" = ", " (same as FP16) = ", 1)
        else:
            bf16 = NA(f"no BF16 tensor cores on {cc_text} ({spec.name})")

    bandwidth: float | NA
    if is_positive_number(max_mem_clock_mhz) and is_positive_number(memory_bus_width_bits):
        mem_clock = float(max_mem_clock_mhz)
        bandwidth = mem_clock * 1e6 * memory_bus_width_bits / 8 * 2 / 1e9
        mem_label = "max memory clock" + ("" if mem_source == "NVML" else f" from {mem_source}")
        formulas["bandwidth"] = (f"{mem_clock:.0f} MHz ({mem_label}) x {memory_bus_width_bits} bits / 8 x 2 "
                                 f"(double data rate) = {bandwidth:.1f} GB/s")
    else:
        bandwidth = _first_na(max_mem_clock_mhz, memory_bus_width_bits,
                              default="max memory clock or bus width unknown")
    return PeakFigures(fp32, fp16, bf16, bandwidth, formulas)
