"""Roofline and utilisation: achieved TFLOP/s, % of peak (MFU), arithmetic intensity, the ridge point,
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

from torchperf_tui.engine.hardware.ceilings import REMEASURE
from torchperf_tui.engine.workloads.input_facts import InputFacts
from torchperf_tui.core.errors import TorchperfError
from torchperf_tui.engine.hardware.nvml import NA, to_jsonable
from torchperf_tui.core.formatting import is_positive_number
from torchperf_tui.core.marks import disturbance_marks


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
    # What this box measured (engine.hardware.ceilings): the compute ceiling of the dtype and the copy bandwidth
    measured_tflops: float | NA = NA("no measured ceilings kept for this device: run `torchperf-tui ceilings`")
    measured_bandwidth_gbs: float | NA = NA("no measured ceilings kept for this device: run `torchperf-tui ceilings`")
    measured_origin: str = ""  # which workload gave the measured compute ceiling ("conv2d 3x3 ..., 2 threads")
    # Where each peak came from: "datasheet", "given" (by the user), "measured" (this box), "" (none)
    flops_from: str = ""
    bandwidth_from: str = ""


@dataclass
class LayerRoofline:
    name: str
    type: str
    flops: int
    bytes: int
    intensity: float | NA  # FLOPs per byte
    side: str | NA  # "memory" or "compute"
    attainable_tflops: float | NA  # min(peak, intensity x bandwidth): the roofline's ceiling here
    time_ms: float | NA  # from the profiler, when given: its own time per iteration (engine.analysis.layer_times)
    achieved_tflops: float | NA
    roofline_pct: float | NA  # achieved / attainable
    pass_pct: float | NA = NA("no per-layer time")  # time_ms / the profiled pass's wall time
    above_ceiling: str | None = None  # roofline_pct above 100 %: why it is no fact (above_ceiling_text, no figure)


@dataclass
class RooflineResult(InputFacts):
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
    # against what this box measured (engine.hardware.ceilings): the compute ceiling of the dtype, the copy bandwidth
    measured_tflops: float | NA = NA("no measured ceilings")
    measured_bandwidth_gbs: float | NA = NA("no measured ceilings")
    measured_mfu_pct: float | NA = NA("no measured ceilings")
    measured_origin: str = ""  # which workload, size and threads gave the measured compute ceiling
    peak_from: str = ""  # "datasheet", "given", "measured" or "" (RooflinePeaks.flops_from)
    bandwidth_from: str = ""
    # A utilisation above 100 % is never a fact: per field ("mfu_pct", "measured_mfu_pct", "bandwidth_pct",
    # "roofline_pct") the sentence shown instead of its value; exceeds_ceiling: any of them (a layer says its own)
    above_ceiling: dict[str, str] = field(default_factory=dict)
    exceeds_ceiling: bool = False
    # Time per layer (engine.analysis.layer_times.LayerTimes), when profiled: the rows above carry their own times, and
    # `time_outside` what no row owns, in ms per iteration, so that rows and outside add up to the pass.
    layer_times: Any = None
    time_outside: dict[str, float] = field(default_factory=dict)
    # Every reason its times may not be the model's alone (engine/hardware/host_noise.py's findings, what the app
    # saw): the timed run's, whose median is the latency here, then the per-layer passes' ("time per layer: ...").
    marks: list[str] = field(default_factory=list)
    # The GPU's own counters (GPM) over the timed run whose median is the latency: what the estimate's side of the
    # roofline can be set against (DRAM active against SM and tensor activity); empty where none were read.
    gpm: dict[str, float] = field(default_factory=dict)

    def disturbance_marks(self) -> list[str]:
        return list(self.marks)

    def to_dict(self) -> dict[str, Any]:
        data = to_jsonable({k: v for k, v in self.__dict__.items() if k != "layer_times"})
        data["layer_times"] = self.layer_times.to_dict() if self.layer_times is not None else None
        data["disturbance_marks"] = self.disturbance_marks()
        return data


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
    this box measured (engine.hardware.ceilings.CeilingsResult), reported beside the datasheet's; where the datasheet
    has none (the CPU) and the user gave none, they are the roofline's peaks.
    """
    notes: list[str] = []
    sources: list[str] = []
    flops_peak: float | NA
    bandwidth: float | NA
    flops_from = bandwidth_from = ""
    if device.startswith("cuda"):
        if gpu is None:
            flops_peak = bandwidth = NA("no GPU facts given (device.probe_device)")
        else:
            attr, formula_key = {"float16": ("peak_fp16_tensor_tflops", "fp16_tensor"),
                                 "bfloat16": ("peak_bf16_tensor_tflops", "bf16_tensor")}.get(
                dtype, ("peak_fp32_tflops", "fp32"))
            flops_peak = getattr(gpu, attr, NA(f"GPU facts lack {attr}"))
            bandwidth = getattr(gpu, "peak_bandwidth_gbs", NA("GPU facts lack peak bandwidth"))
            flops_from = "datasheet" if not isinstance(flops_peak, NA) else ""
            bandwidth_from = "datasheet" if not isinstance(bandwidth, NA) else ""
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
        flops_peak, flops_from = float(peak_tflops), "given"
        sources.append(f"peak {peak_tflops:g} TFLOP/s given by the user")
    if peak_bandwidth_gbs is not None:
        bandwidth, bandwidth_from = float(peak_bandwidth_gbs), "given"
        sources.append(f"peak bandwidth {peak_bandwidth_gbs:g} GB/s given by the user")
    measured_flops, measured_bw, origin = _measured(measured, dtype, tf32 and device.startswith("cuda"))
    if isinstance(flops_peak, NA) and not isinstance(measured_flops, NA):
        flops_peak, flops_from = measured_flops, "measured"
        sources.append(f"measured on this box ({measured.key}): {dtype} compute ceiling {measured_flops:.3g} "
                       f"TFLOP/s ({origin})")
    if isinstance(bandwidth, NA) and not isinstance(measured_bw, NA):
        bandwidth, bandwidth_from = measured_bw, "measured"
        sources.append(f"measured copy bandwidth {measured_bw:.3g} GB/s")
    if measured is not None and getattr(measured, "outdated", None):
        notes.append(f"the measured ceilings were {measured.outdated}")
    ridge = ridge_point(flops_peak, bandwidth)
    return RooflinePeaks(device, dtype, flops_peak, bandwidth, ridge, "; ".join(sources) or "none", notes,
                         measured_flops, measured_bw, origin, flops_from, bandwidth_from)


def _measured(measured: Any, dtype: str, tf32: bool) -> tuple[float | NA, float | NA, str]:
    """(compute ceiling in TFLOP/s for `dtype`, copy bandwidth in GB/s, which workload gave the compute ceiling)
    from a CeilingsResult, or NAs why not."""
    if measured is None:
        why = NA("no measured ceilings kept for this device: run `torchperf-tui ceilings`")
        return why, why, ""
    key = "tf32" if dtype == "float32" and tf32 else dtype
    compute, copy = measured.compute(key), measured.copy()
    flops = compute.value / 1e12 if compute is not None else NA(f"no {key} compute ceiling measured on this device")
    return (flops, (copy.value / 1e9 if copy is not None else NA("no copy bandwidth measured on this device")),
            compute.origin if compute is not None else "")


def ridge_point(peak_tflops: float | NA, peak_bandwidth_gbs: float | NA) -> float | NA:
    """FLOPs per byte at which the memory roof meets the compute roof."""
    if isinstance(peak_tflops, NA):
        return NA(f"no peak FLOP/s: {peak_tflops.reason}")
    if isinstance(peak_bandwidth_gbs, NA):
        return NA(f"no peak bandwidth: {peak_bandwidth_gbs.reason}")
    if not (is_positive_number(peak_tflops) and is_positive_number(peak_bandwidth_gbs)):
        return NA("peaks must be positive")
    return peak_tflops * 1e12 / (peak_bandwidth_gbs * 1e9)


def classify(intensity: float | NA, ridge: float | NA) -> str | NA:
    if isinstance(intensity, NA):
        return intensity
    if isinstance(ridge, NA):
        return NA(f"no ridge point ({ridge.reason})")
    return "memory" if intensity < ridge else "compute"


def attainable(intensity: float | NA, peaks: RooflinePeaks) -> float | NA:
    """The roofline: min(peak FLOP/s, intensity x peak bandwidth), in TFLOP/s."""
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


def _pct_text(pct: float) -> str:
    return f"{pct:.1f} %" if pct < 101 else f"{pct:.0f} %"


def above_ceiling_text(pct: float | None, ceiling_from: str, of: str = "compute") -> str:
    """The one wording, CLI and app alike, for a utilisation above 100 %: not a fact about the model, the
    ceiling under it is too low. `ceiling_from`: "measured", "datasheet" or "given" (the peak's origin), or
    "roofline" for a share of the roofline on its memory side; `of`: "compute" or "bandwidth". `pct` None: the
    sentence without its figure (a table's footnote, shared by its rows)."""
    figure = f" ({_pct_text(pct)})" if pct is not None else ""
    if ceiling_from == "roofline":
        return (f"above the roofline{figure}: the memory roof is too low here (the unfused byte estimate "
                "counts more bytes than moved, or the bandwidth ceiling is too low)")
    if of == "bandwidth":
        why = "data that stayed in cache, or fewer bytes moved than the unfused estimate"
        if ceiling_from == "measured":
            return f"above the measured copy bandwidth{figure}: the ceiling is too low ({why}); {REMEASURE}"
        return f"above the {ceiling_from} peak bandwidth{figure}: the peak is too low for what ran ({why})"
    if ceiling_from == "measured":
        return f"above the measured ceiling{figure}: the ceiling is too low; {REMEASURE}"
    if ceiling_from == "given":
        return f"above the given peak{figure}: the peak given is too low; give the right one (--peak-tflops)"
    return (f"above the datasheet peak{figure}: the peak is too low for what ran (see the notes); "
            "give the right one (--peak-tflops)")


def _above(pct: float | NA, ceiling_from: str, of: str = "compute", figure: bool = True) -> str | None:
    if not (is_positive_number(pct) and pct > 100.0):
        return None
    return above_ceiling_text(pct if figure else None, ceiling_from or "given", of)


def utilisation_text(result: Any, name: str, spec: str = ".1f") -> str:
    """A utilisation field of a RooflineResult ("mfu_pct", "measured_mfu_pct", "bandwidth_pct",
    "roofline_pct") as shown: '42.0 %', the sentence that replaces a figure above 100 %, or 'n/a'."""
    above = getattr(result, "above_ceiling", {}).get(name)
    if above:
        return above
    value = getattr(result, name)
    return f"{value:{spec}} %" if is_positive_number(value) or value == 0 else "n/a"


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
    engine.analysis.layer_times.LayerTimes of the same model and input, for each layer's time, share of the pass and
    achieved FLOP/s.
    """
    latency_ms, latency_source, timed_shape = _latency(timing)
    if not is_positive_number(latency_ms):
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
        l_time: float | NA = float(t) if t is not None and is_positive_number(t) else no_time
        l_achieved: float | NA = (layer_flops / (t / 1000.0) / 1e12 if not isinstance(l_time, NA) and layer_flops
                                  else NA("no FLOPs counted for this layer") if not isinstance(l_time, NA)
                                  else no_time)
        pass_pct = (100.0 * l_time / layer_times.pass_ms if not isinstance(l_time, NA) and layer_times.pass_ms > 0
                    else no_time)
        l_pct = _pct(l_achieved, lbound)
        l_side = classify(li, peaks.ridge_flops_per_byte)
        layers.append(LayerRoofline(layer.name, layer.type, layer_flops, nbytes, li, l_side, lbound, l_time,
                                    l_achieved, l_pct, pass_pct,
                                    _above(l_pct, peaks.flops_from if l_side == "compute" else "roofline",
                                           figure=False)))
    mfu, bandwidth_pct = _pct(achieved, peaks.peak_tflops), _pct(achieved_bw, peaks.peak_bandwidth_gbs)
    measured_mfu, side = _pct(achieved, peaks.measured_tflops), classify(intensity, peaks.ridge_flops_per_byte)
    roofline_pct = _pct(achieved, bound)
    above = {name: text for name, text in (
        ("mfu_pct", _above(mfu, peaks.flops_from)), ("measured_mfu_pct", _above(measured_mfu, "measured")),
        ("bandwidth_pct", _above(bandwidth_pct, peaks.bandwidth_from, "bandwidth")),
        ("roofline_pct", _above(roofline_pct, peaks.flops_from if side == "compute" else "roofline")))
        if text is not None}
    return RooflineResult(
        **{name: getattr(complexity, name) for name in ("model_args", "seq_len", "inputs") if hasattr(complexity, name)},
        model=complexity.model, device=peaks.device, dtype=complexity.dtype,
        input_shape=tuple(complexity.input_shape), flops=int(flops), bytes_moved=bytes_moved,
        bytes_method=method, latency_ms=latency_ms, latency_source=latency_source,
        achieved_tflops=achieved, achieved_bandwidth_gbs=achieved_bw, arithmetic_intensity=intensity,
        peak_tflops=peaks.peak_tflops, peak_bandwidth_gbs=peaks.peak_bandwidth_gbs,
        mfu_pct=mfu, bandwidth_pct=bandwidth_pct,
        ridge_flops_per_byte=peaks.ridge_flops_per_byte, side=side,
        attainable_tflops=bound, roofline_pct=roofline_pct, peaks_source=peaks.source,
        layers=layers, notes=notes, step="train" if training else "infer",
        measured_tflops=peaks.measured_tflops, measured_bandwidth_gbs=peaks.measured_bandwidth_gbs,
        measured_mfu_pct=measured_mfu, measured_origin=peaks.measured_origin, peak_from=peaks.flops_from,
        bandwidth_from=peaks.bandwidth_from, above_ceiling=above,
        exceeds_ceiling=bool(above),
        layer_times=layer_times, time_outside=outside, marks=_marks(timing, layer_times),
        gpm=dict(getattr(getattr(timing, "conditions", None), "gpm", None) or {}),
    )


def _marks(timing: Any, layer_times: Any) -> list[str]:
    """The timed run's marks, then the per-layer passes' said as theirs."""
    run = disturbance_marks(timing)
    layers = disturbance_marks(layer_times)
    return [*run, *(f"time per layer: {line}" for line in layers)]


def gpu_for_device(report: Any, device: str) -> Any:
    """The GpuFacts of `device` ("cuda" -> index 0, "cuda:N") from a device.DeviceReport, or None."""
    if not device.startswith("cuda"):
        return None
    index = int(device.partition(":")[2] or 0)
    for gpu in getattr(report, "gpus", []):
        if gpu.index == index:
            return gpu
    return None
