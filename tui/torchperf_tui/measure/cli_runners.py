"""The CLI's jobs in the measurement process: one per command, each the engine calls that command made in the CLI's
own process before (cli.py builds the params from its arguments; measure/cli_jobs.py runs them). Where a command's
call takes more than the app's job of the same kind (a trace path, peaks, per-arm dtypes), it has a job of its own
here; measure/runners.py's table names them ("cli.bench" -> run_cli_bench) and imports this module when one comes.
"""

from __future__ import annotations

from typing import Any

from torchperf_tui.engine.measurements.ab_arms import AA_REMEDY, refuse_same_arms
from torchperf_tui.measure.runners import JobContext, analysed_inputs, history_extra, run_time, say_assumed_input
from torchperf_tui.engine.analysis.profiling import profile_model
from torchperf_tui.engine.hardware.ceilings import kept_for
from torchperf_tui.engine.hardware.device_choice import resolve_device
from torchperf_tui.engine.measurements.ceiling_measurement import ceilings
from torchperf_tui.engine.measurements.determinism import determinism_of
from torchperf_tui.engine.measurements.flags import inert_flags
from torchperf_tui.engine.measurements.memsnap import record_memory_snapshot
from torchperf_tui.engine.workloads.inputs import dtype_note
from torchperf_tui.measure.follow_up import layer_times_of_run, roofline_of_run


def run_cli_flops(params: dict, ctx: JobContext) -> tuple[Any, dict]:
    """params: spec, input_shape (with batch, or None), batch, dtype, layers, step. Progress "note" as bench's.
    -> (Complexity, {})."""
    # torch and numpy: loaded once this process has set its CPUs (measure/process.py)
    from torchperf_tui.engine.workloads.complexity import analyse_complexity

    inputs = analysed_inputs(params, params.get("input_shape"))
    result = analyse_complexity(params["spec"], inputs.shape, dtype=params["dtype"], layers=params["layers"],
                                step=params["step"], inputs=inputs, model_args=tuple(params.get("model_args", ())))
    say_assumed_input(params["spec"], params.get("input_shape") is not None, ctx)  # once it built: no noise
    return result, {}


def run_cli_bench(params: dict, ctx: JobContext) -> tuple[Any, dict]:
    """params: cfg, and for --modes: modes (parsed in cli.py, which also refuses --cold-l2 without them),
    cold_l2, per_block. Progress "note": a line about the flags or dtype on this device, before anything runs. Streams
    Samples (a timing). -> (TimingResult, {"fingerprint"}) or (ModesResult, {})."""
    cfg = params["cfg"]
    kind = resolve_device(cfg.device).type
    for line in inert_flags(cfg.flags, kind) + [note for note in (dtype_note(cfg.dtype, kind),) if note]:
        ctx.progress("note", line)
    if params.get("modes") is not None:
        # numpy: loaded once this process has set its CPUs (measure/process.py)
        from torchperf_tui.engine.measurements.timing_modes import run_modes

        return run_modes(cfg, tuple(params["modes"]), cold_l2=params.get("cold_l2", False),
                         per_block=params["per_block"], should_cancel=ctx.cancelled), {}
    timed = run_time({"cfg": cfg}, ctx)
    say_assumed_input(cfg.model, cfg.input_shape is not None, ctx)  # once the model ran: a failure says only itself
    return timed


def run_cli_profile(params: dict, ctx: JobContext) -> tuple[Any, dict]:
    """params: cfg, iters, sort_by, trace_path. -> (ProfileResult, {})."""
    # Kineto's log lines on fd 2 go to this process's log (measure/process.py), not to the CLI's stderr.
    return profile_model(params["cfg"], iters=params["iters"], sort_by=params.get("sort_by"),
                         trace_path=params.get("trace_path"), should_cancel=ctx.cancelled), {}


def run_cli_roofline(params: dict, ctx: JobContext) -> tuple[Any, dict]:
    """params: cfg, peak_tflops, peak_bandwidth_gbs, layers, layer_iters. A timing, then its roofline (with each
    layer's time for `layers`). -> (Roofline, {})."""
    # numpy: loaded once this process has set its CPUs (measure/process.py)
    from torchperf_tui.engine.measurements.timing import run_benchmark
    # Before the run: a ceilings path that is no file is one line now, a corrupt one a note, not a run lost.
    measured = kept_for(params["cfg"].device, on_corrupt=lambda line: ctx.progress("note", line))
    timing = run_benchmark(params["cfg"], should_cancel=ctx.cancelled)
    peaks = {"peak_tflops": params.get("peak_tflops"), "peak_bandwidth_gbs": params.get("peak_bandwidth_gbs"),
             "measured": measured}
    if params.get("layers"):
        return layer_times_of_run(timing, iters=params["layer_iters"], should_cancel=ctx.cancelled, **peaks), {}
    return roofline_of_run(timing, **peaks), {}


def run_cli_compare(params: dict, ctx: JobContext) -> tuple[Any, dict]:
    """params: base (BenchConfig), a, b (ArmSpecs: the SPECs parsed and checked in cli.py), blocks, per_block,
    seed, kernels, time_budget_s, aa (identical arms allowed). Progress "block" as the "ab" job. -> (ABResult, {"fingerprint"}) or
    (KernelComparison, {})."""
    # numpy: loaded once this process has set its CPUs (measure/process.py)
    from torchperf_tui.engine.measurements.abtest import run_ab

    base, arm_a, arm_b = params["base"], params["a"], params["b"]
    if not params.get("aa"):  # as they resolve here: threads=2 against '' where 2 is the default is one set-up
        refuse_same_arms(base, arm_a, arm_b, AA_REMEDY)
    if params.get("kernels"):
        # torch and numpy: loaded once this process has set its CPUs (measure/process.py)
        from torchperf_tui.engine.analysis.kernels import conv_kernels

        return conv_kernels(base, arm_a, arm_b, should_cancel=ctx.cancelled), {}
    result = run_ab(base, arm_a, arm_b, blocks=params["blocks"], per_block=params["per_block"], seed=params["seed"],
                    should_cancel=ctx.cancelled, time_budget_s=params.get("time_budget_s"),
                    on_block=lambda arm, i, n, samples: ctx.progress("block", (arm, i, n, list(samples))))
    return result, history_extra(result)


def run_cli_determinism(params: dict, ctx: JobContext) -> tuple[Any, dict]:
    """params: cfg (BenchConfig; its input None: the model's default), runs. -> (DeterminismReport, {})."""
    return determinism_of(params["cfg"], runs=params["runs"]), {}


def run_cli_memsnap(params: dict, ctx: JobContext) -> tuple[Any, dict]:
    """params: cfg, iters, out_dir. -> (MemorySnapshotResult, {})."""
    return record_memory_snapshot(params["cfg"], iters=params["iters"], out_dir=params.get("out_dir"),
                                  should_cancel=ctx.cancelled), {}


def run_cli_ceilings(params: dict, ctx: JobContext) -> tuple[Any, dict]:
    """params: device, refresh. The kept ceilings, or measured now (and kept). -> (CeilingsResult, {})."""
    return ceilings(params.get("device", "auto"), refresh=params.get("refresh", False),
                    should_cancel=ctx.cancelled), {}
