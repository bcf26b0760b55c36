"""Roofline and utilisation: achieved TFLOPS, % of peak (MFU), arithmetic intensity, the ridge point,
and which side of the roofline the model (and each layer) sits on. Pure functions over a Complexity,
a latency and the device's peaks; whatever cannot be known is NA with the reason.

Bytes moved are an estimate of an unfused eager forward pass with no cache reuse between layers: each
layer reads its weights and its input once and writes its output once, so

    layer bytes = params x itemsize + first input tensor's elements x itemsize + output bytes
    model bytes = sum of the layer bytes (= weights + every activation read once and written once)

Fused kernels (cuDNN conv+bias+ReLU, torch.compile) and caches move fewer bytes, so the intensity here
is a lower bound and a "memory" verdict near the ridge should be read with that in mind.

CPU peaks are NA by default: peak FLOP/s needs the FMA units per core and the sustained vector clock,
and bandwidth the populated memory channels, none of which the OS reports. A user who knows them (from
a datasheet) passes `peak_tflops` / `peak_bandwidth_gbs`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from torchperf_tui.engine.errors import TorchperfError
from torchperf_tui.engine.nvml import NA, to_jsonable

BYTES_METHOD = ("unfused estimate: per layer, weights + first input + outputs, each read or written once "
                "(no fusion, no cache reuse)")
_ITEMSIZE = {"float32": 4, "float16": 2, "bfloat16": 2, "float64": 8}


@dataclass
class RooflinePeaks:
    """The device's ceilings for one dtype. ridge = peak FLOP/s / peak bytes/s (FLOPs per byte)."""

    device: str
    dtype: str
    peak_tflops: float | NA
    peak_bandwidth_gbs: float | NA
    ridge_flops_per_byte: float | NA
    source: str  # which peak was used and where it came from (the formula when the device gave one)
    notes: list[str] = field(default_factory=list)
    # What this box measured (engine.ceilings): the matmul ceiling of the dtype and the copy bandwidth
    measured_tflops: float | NA = NA("no measured ceilings kept for this device: run `torchperf-tui ceilings`")
    measured_bandwidth_gbs: float | NA = NA("no measured ceilings kept for this device: run `torchperf-tui ceilings`")


@dataclass
class LayerRoofline:
    name: str
    type: str
    flops: int
    bytes: int
    intensity: float | NA  # FLOPs per byte
    side: str | NA  # "memory" or "compute"
    attainable_tflops: float | NA  # min(peak, intensity x bandwidth): the roofline's ceiling here
    time_ms: float | NA  # from the profiler, when given: its own time per iteration (engine.layer_times)
    achieved_tflops: float | NA
    roofline_pct: float | NA  # achieved / attainable
    pass_pct: float | NA = NA("no per-layer time")  # time_ms / the profiled pass's wall time


@dataclass
class RooflineResult:
    model: str
    device: str
    dtype: str
    input_shape: tuple[int, ...]
    flops: int  # of one iteration: a forward pass, or a training step's forward and backward
    bytes_moved: int
    bytes_method: str
    latency_ms: float
    latency_source: str  # e.g. "median of 50 timed iterations"
    achieved_tflops: float
    achieved_bandwidth_gbs: float | NA  # bytes_moved / latency: the bandwidth the estimate implies
    arithmetic_intensity: float | NA
    peak_tflops: float | NA
    peak_bandwidth_gbs: float | NA
    mfu_pct: float | NA  # achieved / peak FLOP/s
    bandwidth_pct: float | NA  # achieved bandwidth / peak bandwidth
    ridge_flops_per_byte: float | NA
    side: str | NA  # "memory" (intensity below the ridge) or "compute"
    attainable_tflops: float | NA  # min(peak, intensity x bandwidth)
    roofline_pct: float | NA  # achieved / attainable
    peaks_source: str
    layers: list[LayerRoofline] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    step: str = "infer"  # "train": flops and latency are a training step's (bytes and intensity n/a)
    # against what this box measured (engine.ceilings): the matmul ceiling of the dtype, the copy bandwidth
    measured_tflops: float | NA = NA("no measured ceilings")
    measured_bandwidth_gbs: float | NA = NA("no measured ceilings")
    measured_mfu_pct: float | NA = NA("no measured ceilings")
    # Time per layer (engine.layer_times.LayerTimes), when profiled: the rows above carry their own times, and
    # `time_outside` what no row owns, in ms per iteration, so that rows and outside add up to the pass.
    layer_times: Any = None
    time_outside: dict[str, float] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        data = to_jsonable({k: v for k, v in self.__dict__.items() if k != "layer_times"})
        data["layer_times"] = self.layer_times.to_dict() if self.layer_times is not None else None
        return data


def _num(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value > 0


# --------------------------------------------------------------------------------------------------------
# Peaks


def peaks_for(device: str, dtype: str = "float32", gpu: Any = None, *, tf32: bool = False,
              peak_tflops: float | None = None, peak_bandwidth_gbs: float | None = None,
              measured: Any = None) -> RooflinePeaks:
    """The ceilings for `dtype` on `device` ("cpu", "cuda", "cuda:N").

    `gpu` is a device.GpuFacts: float32 uses its FP32 (CUDA core) peak, float16/bfloat16 its dense tensor
    peak. Pass `tf32=flags.tf32_cudnn or flags.tf32_matmul` for a float32 run: with TF32 on (cuDNN's
    default) convolutions run on tensor cores and can beat the FP32 peak; the result then says so.
    `peak_tflops`/`peak_bandwidth_gbs` override (a datasheet figure, or a CPU's). `measured`: the ceilings
    this box measured (engine.ceilings.CeilingsResult), reported beside the datasheet's; where the datasheet
    has none (the CPU) and the user gave none, they are the roofline's peaks.
    """
    notes: list[str] = []
    sources: list[str] = []
    flops_peak: float | NA
    bandwidth: float | NA
    if device.startswith("cuda"):
        if gpu is None:
            flops_peak = bandwidth = NA("no GPU facts given (device.probe_device)")
        else:
            attr, formula_key = {"float16": ("peak_fp16_tensor_tflops", "fp16_tensor"),
                                 "bfloat16": ("peak_bf16_tensor_tflops", "bf16_tensor")}.get(
                dtype, ("peak_fp32_tflops", "fp32"))
            flops_peak = getattr(gpu, attr, NA(f"GPU facts lack {attr}"))
            bandwidth = getattr(gpu, "peak_bandwidth_gbs", NA("GPU facts lack peak bandwidth"))
            formulas = getattr(gpu, "formulas", {}) or {}
            name = getattr(gpu, "name", "GPU")
            sources.append(f"{name} {formula_key.replace('_', ' ')}: "
                           + formulas.get(formula_key, str(flops_peak)))
            if "bandwidth" in formulas:
                sources.append(formulas["bandwidth"])
            if dtype == "float32" and tf32:
                notes.append("TF32 is on: matmuls/convs may run on tensor cores above the FP32 peak used here, "
                             "so MFU can exceed what FP32 allows")
    else:
        flops_peak = NA("CPU peak FLOP/s needs FMA units per core and the sustained vector clock, which the OS "
                        "does not report; measure the ceilings (torchperf-tui ceilings, C on the Device tab) or "
                        "give a datasheet figure (roofline --peak-tflops)")
        bandwidth = NA("CPU peak bandwidth needs the populated memory channels and their speed, which the OS "
                       "does not report; measure the ceilings (torchperf-tui ceilings, C on the Device tab) or "
                       "give a datasheet figure (roofline --peak-bandwidth)")
    if peak_tflops is not None:
        flops_peak = float(peak_tflops)
        sources.append(f"peak {peak_tflops:g} TFLOPS given by the user")
    if peak_bandwidth_gbs is not None:
        bandwidth = float(peak_bandwidth_gbs)
        sources.append(f"peak bandwidth {peak_bandwidth_gbs:g} GB/s given by the user")
    measured_flops, measured_bw = _measured(measured, dtype, tf32 and device.startswith("cuda"))
    if isinstance(flops_peak, NA) and not isinstance(measured_flops, NA):
        flops_peak = measured_flops
        sources.append(f"measured on this box ({measured.key}): {dtype} matmul ceiling {measured_flops:.3g} TFLOP/s")
    if isinstance(bandwidth, NA) and not isinstance(measured_bw, NA):
        bandwidth = measured_bw
        sources.append(f"measured copy bandwidth {measured_bw:.3g} GB/s")
    ridge = ridge_point(flops_peak, bandwidth)
    return RooflinePeaks(device, dtype, flops_peak, bandwidth, ridge, "; ".join(sources) or "none", notes,
                         measured_flops, measured_bw)


def _measured(measured: Any, dtype: str, tf32: bool) -> tuple[float | NA, float | NA]:
    """(matmul ceiling in TFLOP/s for `dtype`, copy bandwidth in GB/s) from a CeilingsResult, or NAs why not."""
    if measured is None:
        why = NA("no measured ceilings kept for this device: run `torchperf-tui ceilings`")
        return why, why
    key = "tf32" if dtype == "float32" and tf32 else dtype
    matmul, copy = measured.matmul(key), measured.copy()
    flops = matmul.value / 1e12 if matmul is not None else NA(f"no {key} matmul ceiling measured on this device")
    return flops, (copy.value / 1e9 if copy is not None else NA("no copy bandwidth measured on this device"))


def ridge_point(peak_tflops: float | NA, peak_bandwidth_gbs: float | NA) -> float | NA:
    """FLOPs per byte at which the memory roof meets the compute roof."""
    if isinstance(peak_tflops, NA):
        return NA(f"no peak FLOP/s: {peak_tflops.reason}")
    if isinstance(peak_bandwidth_gbs, NA):
        return NA(f"no peak bandwidth: {peak_bandwidth_gbs.reason}")
    if not (_num(peak_tflops) and _num(peak_bandwidth_gbs)):
        return NA("peaks must be positive")
    return peak_tflops * 1e12 / (peak_bandwidth_gbs * 1e9)


def classify(intensity: float | NA, ridge: float | NA) -> str | NA:
    if isinstance(intensity, NA):
        return intensity
    if isinstance(ridge, NA):
        return NA(f"no ridge point ({ridge.reason})")
    return "memory" if intensity < ridge else "compute"


def attainable(intensity: float | NA, peaks: RooflinePeaks) -> float | NA:
    """The roofline: min(peak FLOP/s, intensity x peak bandwidth), in TFLOPS."""
    if isinstance(intensity, NA):
        return intensity
    if isinstance(peaks.peak_tflops, NA) or isinstance(peaks.peak_bandwidth_gbs, NA):
        return NA("a peak is unknown")
    return min(float(peaks.peak_tflops), intensity * peaks.peak_bandwidth_gbs * 1e9 / 1e12)


def _pct(value: float | NA, of: float | NA) -> float | NA:
    if isinstance(value, NA):
        return value
    if isinstance(of, NA):
        return of
    return 100.0 * value / of if of > 0 else NA("zero peak")


# --------------------------------------------------------------------------------------------------------
# Bytes moved


def itemsize(dtype: str) -> int:
    try:
        return _ITEMSIZE[dtype]
    except KeyError:
        raise TorchperfError(f"unknown dtype {dtype!r} for a byte estimate") from None


def layer_bytes(layer: Any, dtype: str) -> int:
    """Weights + first input + outputs of one LayerStat, each once (see the module docstring)."""
    size = itemsize(dtype)
    inputs = math.prod(layer.input_shape) * size if layer.input_shape else 0
    return int(layer.params * size + inputs * max(1, getattr(layer, "calls", 1)) + layer.output_bytes)


def estimate_bytes(complexity: Any) -> tuple[int, str]:
    """(bytes one forward moves, how it was estimated) for a complexity.Complexity."""
    if complexity.layers:
        return sum(layer_bytes(layer, complexity.dtype) for layer in complexity.layers), BYTES_METHOD
    size = itemsize(complexity.dtype)
    inputs = math.prod(complexity.input_shape) * size
    return (int(complexity.size_bytes + inputs),
            "weights + input only (no per-layer table, so activations are left out: an underestimate)")


# --------------------------------------------------------------------------------------------------------
# The analysis


def _latency(timing: Any) -> tuple[float, str, tuple[int, ...] | None]:
    if isinstance(timing, (int, float)):
        return float(timing), "given", None
    stats = getattr(timing, "stats", None)
    if stats is None:
        raise TorchperfError("the timing run has no samples (cancelled?): nothing to compute a rate from")
    return float(stats.p50_ms), f"median of {stats.n} timed iterations", tuple(timing.input_shape)


OUTSIDE_ROWS = "blocks' own code (a residual add, Python between layers)"
GPU_IDLE = "GPU idle"


def join_layer_times(layers: list[Any], times: Any) -> tuple[dict[str, float], dict[str, float]]:
    """({table row name: its own ms per iteration}, {what no row owns: ms}) from a LayerTimes: the table's rows
    are the complexity's (leaf modules, and containers that compute something of their own); a container
    that only calls its children (a ResNet block's residual add is not counted as FLOPs) is summed in one
    outside row, beside the times the LayerTimes itself keeps outside every module; on a GPU, the pass's
    idle time completes the rows."""
    by_name = {m.name or "(root)": m for m in times.modules}
    rows = {layer.name for layer in layers}
    own = {name: m.ms for name, m in by_name.items() if name in rows}
    outside = {OUTSIDE_ROWS: sum(m.ms for name, m in by_name.items() if name not in rows), **times.outside}
    if times.gpu is not None:
        outside[GPU_IDLE] = max(0.0, times.gpu.wall_ms - times.gpu.busy_ms)
    return own, {row: ms for row, ms in outside.items() if ms > 0}


def analyse_roofline(complexity: Any, timing: Any, peaks: RooflinePeaks, layer_times: Any = None) -> RooflineResult:
    """Where the model sits on the roofline.

    `complexity`: a complexity.Complexity counted at the input the timing ran at. `timing`: a
    timing.TimingResult (its median latency is used) or a latency in ms. `layer_times`: optional, an
    engine.layer_times.LayerTimes of the same model and input, for each layer's time, share of the pass and
    achieved FLOP/s.
    """
    latency_ms, latency_source, timed_shape = _latency(timing)
    if not _num(latency_ms):
        raise TorchperfError(f"latency must be a positive number of ms, got {latency_ms!r}")
    if timed_shape is not None and tuple(complexity.input_shape) != timed_shape:
        raise TorchperfError(f"the FLOPs were counted at input {list(complexity.input_shape)} but the timing "
                             f"ran at {list(timed_shape)}: analyse both at the same shape")
    notes = list(peaks.notes)
    seconds = latency_ms / 1000.0
    training = getattr(complexity, "step", "infer") == "train"
    flops = complexity.step_flops if training else complexity.flops
    achieved = flops / seconds / 1e12
    if training:
        # The byte estimate reads each layer's forward tensors once; a backward reads them again, with the
        # gradients, and the optimizer reads and writes every weight and its state: no honest single count.
        bytes_moved, method = 0, "not estimated for a training step (only a forward pass's are)"
        why = "the bytes a training step moves are not estimated"
        achieved_bw: float | NA = NA(why)
        intensity: float | NA = NA(why)
        notes.append(f"FLOPs of one training step: forward {complexity.flops:,} + backward "
                     f"{complexity.backward_flops or 0:,} (the optimizer's element-wise update is not counted)")
    else:
        bytes_moved, method = estimate_bytes(complexity)
        achieved_bw = bytes_moved / seconds / 1e9
        intensity = complexity.flops / bytes_moved if bytes_moved > 0 else NA("no bytes estimated")
    if flops == 0:
        notes.append("the FLOP counter counted nothing for this model (ops it does not know)")
    bound = attainable(intensity, peaks)
    own_ms, outside = join_layer_times(complexity.layers, layer_times) if layer_times is not None else ({}, {})
    no_time = NA("no per-layer time (`roofline --layers` or the Layers tab's t profiles the layers)")
    layers = []
    # A training step's rows: forward and backward FLOPs and time (no byte estimate), only once timed.
    for layer in (complexity.layers if not training or layer_times is not None else []):
        layer_flops = int(layer.flops + ((layer.backward_flops or 0) if training else 0))
        if training:
            nbytes, li = 0, NA("the bytes a training step moves are not estimated")
        else:
            nbytes = layer_bytes(layer, complexity.dtype)
            li = layer.flops / nbytes if nbytes > 0 else NA("no bytes estimated for this row")
        lbound = attainable(li, peaks)
        t = own_ms.get(layer.name)
        l_time: float | NA = float(t) if t is not None and _num(t) else no_time
        l_achieved: float | NA = (layer_flops / (t / 1000.0) / 1e12 if not isinstance(l_time, NA) and layer_flops
                                  else NA("no FLOPs counted for this layer") if not isinstance(l_time, NA)
                                  else no_time)
        pass_pct = (100.0 * l_time / layer_times.pass_ms if not isinstance(l_time, NA) and layer_times.pass_ms > 0
                    else no_time)
        layers.append(LayerRoofline(layer.name, layer.type, layer_flops, nbytes, li,
                                    classify(li, peaks.ridge_flops_per_byte), lbound, l_time, l_achieved,
                                    _pct(l_achieved, lbound), pass_pct))
    return RooflineResult(
        model=complexity.model, device=peaks.device, dtype=complexity.dtype,
        input_shape=tuple(complexity.input_shape), flops=int(flops), bytes_moved=bytes_moved,
        bytes_method=method, latency_ms=latency_ms, latency_source=latency_source,
        achieved_tflops=achieved, achieved_bandwidth_gbs=achieved_bw, arithmetic_intensity=intensity,
        peak_tflops=peaks.peak_tflops, peak_bandwidth_gbs=peaks.peak_bandwidth_gbs,
        mfu_pct=_pct(achieved, peaks.peak_tflops), bandwidth_pct=_pct(achieved_bw, peaks.peak_bandwidth_gbs),
        ridge_flops_per_byte=peaks.ridge_flops_per_byte, side=classify(intensity, peaks.ridge_flops_per_byte),
        attainable_tflops=bound, roofline_pct=_pct(achieved, bound), peaks_source=peaks.source,
        layers=layers, notes=notes, step="train" if training else "infer",
        measured_tflops=peaks.measured_tflops, measured_bandwidth_gbs=peaks.measured_bandwidth_gbs,
        measured_mfu_pct=_pct(achieved, peaks.measured_tflops), layer_times=layer_times, time_outside=outside,
    )


def gpu_for_device(report: Any, device: str) -> Any:
    """The GpuFacts of `device` ("cuda" -> index 0, "cuda:N") from a device.DeviceReport, or None."""
    if not device.startswith("cuda"):
        return None
    index = int(device.partition(":")[2] or 0)
    for gpu in getattr(report, "gpus", []):
        if gpu.index == index:
            return gpu
    return None
