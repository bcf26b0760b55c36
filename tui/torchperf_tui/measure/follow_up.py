"""The steps both front ends take after a run: saving its records to the history, and placing it on the
roofline. The CLI calls them in its process; the TUI saves from a thread of the UI process (whole records,
even if the measurement process dies) and asks the measurement process for the roofline (it needs torch).
"""

from __future__ import annotations

from typing import Any

from torchperf_tui.core.errors import TorchperfError, user_message
from torchperf_tui.engine.analysis.layer_times import DEFAULT_ITERS, layer_times
from torchperf_tui.engine.analysis.roofline import analyse_roofline, gpu_for_device, peaks_for
from torchperf_tui.engine.records.history_file import HistoryFile, HistoryNotDurable
from torchperf_tui.engine.records.result_records import records_of
from torchperf_tui.engine.hardware.ceilings import kept_for
from torchperf_tui.engine.hardware.device import probe_device


def save_to_history(result: Any, path: Any = None, fingerprint: dict | None = None,
                    saved: list | None = None, records: list | None = None) -> str | None:
    """Append a completed run (or both arms of an A/B) to the history at once. Returns None when saved, else
    one line for a warning: a history that cannot be written never loses the result on screen. `saved`: a list
    the records written are added to (their ids, for a run logged elsewhere too); `records`: the run's records
    made already (a gate's, bench --json's), saved as they are."""
    try:
        records = records if records is not None else records_of(result, fingerprint=fingerprint)
        HistoryFile(path).extend(records)
    except HistoryNotDurable as exc:  # in the file; only the flush to disk failed
        if saved is not None:
            saved.extend(records)
        return user_message(exc)
    except (TorchperfError, OSError, ValueError) as exc:
        return f"run not saved to history: {user_message(exc)}"
    if saved is not None:
        saved.extend(records)
    return None


def roofline_of_run(result: Any, report: Any = None, peak_tflops: float | None = None,
                    peak_bandwidth_gbs: float | None = None, measured: Any = "kept", layer_times: Any = None):
    """A finished TimingResult on the roofline: FLOPs counted at the run's own input and dtype (a training
    run's forward and backward), peaks from `report` (the device report; probed when None on CUDA), or the
    user's overrides; under autocast the peaks of the autocast dtype, which its convolutions and matmuls run
    in. `measured`: the ceilings this box measured (engine.hardware.ceilings), by default those kept for the run's
    device (none measured here). `layer_times`: the run's engine.analysis.layer_times.LayerTimes, for the time of each
    layer (see layer_times_of_run). Needs torch."""
    # torch and numpy: loaded once this process has set its CPUs (measure/process.py)
    from torchperf_tui.engine.workloads.complexity import analyse_complexity
    if result.shapes != "fixed":
        raise TorchperfError(f"shape schedule {result.shapes}: the roofline needs one input shape")
    step = getattr(result, "step", "infer")
    cfg = measured_config(result)
    complexity = analyse_complexity(result.model, result.input_shape, dtype=result.dtype, layers=True,
                                    step=step, inputs=cfg.input_spec(), model_args=cfg.model_args)
    gpu = None
    if result.device.startswith("cuda"):
        if report is None:
            report = probe_device()
        gpu = gpu_for_device(report, result.device)
    flags = result.flags
    amp = getattr(result, "amp", None)
    compute_dtype = {"fp16": "float16", "bf16": "bfloat16"}.get(amp, result.dtype)
    if measured == "kept":
        measured = kept_for(result.device)
    peaks = peaks_for(result.device, compute_dtype, gpu, tf32=flags.tf32_cudnn or flags.tf32_matmul,
                      peak_tflops=peak_tflops, peak_bandwidth_gbs=peak_bandwidth_gbs, measured=measured)
    roofline = analyse_roofline(complexity, result, peaks, layer_times=layer_times)
    if amp:
        roofline.notes.append(f"autocast {amp}: the peaks are {compute_dtype}'s, which its convolutions and "
                              "matmuls run in (the FLOPs are the same count)")
    return roofline


def measured_config(result: Any):
    """The BenchConfig a finished TimingResult measured (its `config`), to measure it again."""
    if getattr(result, "config", None) is None:
        raise TorchperfError("this run does not say what it measured (a result from another version): run it again")
    return result.config


def layer_times_of_run(result: Any, report: Any = None, *, iters: int | None = None,
                       should_cancel: Any = None, **roofline_options: Any):
    """A finished run on the roofline with the time of each layer: its model, input, flags and step profiled
    again (engine.analysis.layer_times), so every row has its time, share of the pass and achieved FLOP/s. Needs
    torch."""
    times = layer_times(measured_config(result), iters=iters or DEFAULT_ITERS, should_cancel=should_cancel)
    if times.cancelled and not times.modules:
        return None
    return roofline_of_run(result, report, layer_times=times, **roofline_options)
