"""What each job kind does in the measurement process (measure/jobs.py names the runner of each): plain calls of
the engine, with the job's cancel flag and event stream wired in. One runner per kind serves the app and the CLI
alike: both send it the same params.

A runner takes the job's params (plain values: a BenchConfig, ArmSpecs, strings) and a JobContext, and returns
(result, extra). What a front end may show beside the result goes to both: notes as Progress("note") (the CLI's
stderr; the app leaves them out), the history's fingerprint in extra. It may raise: the main loop turns the exception
into one line (JobFailed).
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections import deque
from typing import Any, Callable

from torchperf_tui.core.errors import TorchperfError
from torchperf_tui.engine.measurements.ab_arms import AA_REMEDY, ArmSpec, refuse_same_arms
from torchperf_tui.engine.measurements.flags import (Flags, applicability_table, applied_flags, inert_flags,
                                                     pristine_state)
from torchperf_tui.engine.workloads.inputs import dtype_note
from torchperf_tui.measure.protocol import NOTE, Progress, Samples
from torchperf_tui.engine.analysis.profiling import profile_model
from torchperf_tui.engine.analysis.quant_prediction import QuantPrediction, prediction_for, ratio_of_quantized
from torchperf_tui.engine.hardware.ceilings import kept_for
from torchperf_tui.engine.hardware.device import probe_device
from torchperf_tui.engine.hardware.device_choice import resolve_device
from torchperf_tui.engine.hardware.input_copy import input_copy_of
from torchperf_tui.engine.hardware.lazy_torch import torch
from torchperf_tui.engine.hardware.telemetry import release_memory
from torchperf_tui.engine.measurements.bench_config import BenchConfig
from torchperf_tui.engine.measurements.ceiling_measurement import ceilings
from torchperf_tui.engine.measurements.collectives import run_collectives
from torchperf_tui.engine.measurements.ddp import run_ddp
from torchperf_tui.engine.measurements.determinism import determinism_of
from torchperf_tui.engine.measurements.memsnap import record_memory_snapshot
from torchperf_tui.engine.measurements.sweep import run_sweep
from torchperf_tui.engine.records.fingerprint import environment_fingerprint
from torchperf_tui.engine.workloads.model_catalogue import list_models
from torchperf_tui.measure.follow_up import layer_times_of_run, roofline_of_run

SEND_EVERY_S = 0.5  # batched samples leave at most twice a second: the UI redraws a run at that rate anyway
# A CPU run's model threads fill the cores the app's process wakes on: each batch it receives costs a redraw that
# preempts an iteration or two, and those land in the tail. Its batches leave at most once a second
# (bench/results/tui_fidelity.txt: resnet18's p90 TUI/CLI on 2 cores at 0.5 s and at 1 s).
CPU_SEND_EVERY_S = 1.0


class JobContext:
    """A running job's link to the UI: its cancel flag, progress events, and the sample stream."""

    def __init__(self, job_id: int, send: Callable[[Any], None]) -> None:
        self.job_id = job_id
        self.send = send
        self.cancel_event = threading.Event()
        self.last_phase = ""  # of the latest timed-loop sample ("first", "warmup", "timed"), sent or not

    def cancelled(self) -> bool:
        return self.cancel_event.is_set()

    def progress(self, what: str, data: Any) -> None:
        self.send(Progress(self.job_id, what, data))


class SampleStream:
    """Samples from a timed loop: the first at once, the rest in batches of at most one every `every_s`
    (SEND_EVERY_S, or CPU_SEND_EVERY_S for a run on the CPU).

    The loop's callbacks append to deques; the batch leaves from the measuring thread itself, between two
    iterations (outside the timer, a pickle of a few floats and one write to the pipe, some tens of
    microseconds), when `every_s` has passed. Not from a thread of its own: on a box whose cores the
    model's threads fill, waking a sender thread preempts one of them in the middle of an iteration, and
    that showed in the tail (resnet18 on 2 cores: p90 1.48x the CLI's with a sender thread, 1.15x without).
    `close()` sends the rest, before the job's result.
    """

    def __init__(self, ctx: JobContext, every_s: float = SEND_EVERY_S) -> None:
        self.ctx = ctx
        self.every_s = every_s
        self.samples: deque = deque()  # (phase, index, total, ms)
        self.first_seen: deque = deque()  # bool per timed iteration, appended before its sample
        self.memory: deque = deque()  # (time, allocated, reserved)
        self.memory_kind = ""
        # The first sample leaves at once (a model whose next pass takes a minute shows its first pass meanwhile);
        # the rest in batches. It left at once before only because the flags took over a second to apply.
        self._last_send = float("-inf")

    # -- the measuring thread, between iterations -------------------------------------------------
    def on_sample(self, phase: str, index: int, total: int, ms: float) -> None:
        self.samples.append((phase, index, total, ms))
        self.ctx.last_phase = phase
        now = time.monotonic()
        if now - self._last_send >= self.every_s:
            self._last_send = now
            self._flush()

    def on_shape(self, index: int, shape: tuple, first_seen: bool) -> None:
        self.first_seen.append(first_seen)

    def on_memory(self, point: tuple, kind: str) -> None:
        self.memory_kind = kind
        self.memory.append(point)

    def _flush(self) -> None:
        taken = []
        while self.samples:
            taken.append(self.samples.popleft())
        memory = []
        while self.memory:
            memory.append(self.memory.popleft())
        if not taken and not memory:
            return
        groups: list[list[tuple]] = []
        for item in taken:
            if groups and groups[-1][0][0] == item[0]:
                groups[-1].append(item)
            else:
                groups.append([item])
        if not groups:  # memory points alone
            self.ctx.send(Samples(self.ctx.job_id, "", 0, 0, (), (), tuple(memory), self.memory_kind))
            return
        for n, group in enumerate(groups):
            phase, index, total = group[-1][0], group[-1][1], group[-1][2]
            seen: tuple[bool, ...] = ()
            if phase == "timed":
                seen = tuple(self.first_seen.popleft() if self.first_seen else False for _ in group)
            self.ctx.send(Samples(self.ctx.job_id, phase, index, total, tuple(item[3] for item in group), seen,
                                  tuple(memory) if n == len(groups) - 1 else (), self.memory_kind))

    def close(self) -> None:
        self._flush()


def send_every_s(cfg) -> float:
    """How often a timing run's samples leave: CPU_SEND_EVERY_S where the model runs on the CPU."""
    try:
        on_cpu = resolve_device(cfg.device).type == "cpu"
    except Exception:  # noqa: BLE001 - a bad device is the run's own error to report, in its place
        on_cpu = False
    return CPU_SEND_EVERY_S if on_cpu else SEND_EVERY_S


# -- what every front end is told beside a job's result -------------------------------------------------

def history_extra(result: Any) -> dict:
    """The environment fingerprint for the run's history records; none for a cancelled run (not saved)."""
    if result.cancelled:
        return {}
    return {"fingerprint": environment_fingerprint(device=result.device)}


def say_setup_notes(cfg: BenchConfig, ctx: JobContext) -> None:
    """A Progress "note" for each flag without effect on the run's device and for its dtype there, before anything
    runs (the CLI prints them on stderr; the app shows its own, app/session.py). A device that is not there fails
    here, with the line the run itself would give."""
    kind = resolve_device(cfg.device).type
    for line in inert_flags(cfg.flags, kind) + [note for note in (dtype_note(cfg.dtype, kind),) if note]:
        ctx.progress(NOTE, line)


def arms_said(params: dict) -> tuple[ArmSpec, ArmSpec]:
    """params' arms "a" and "b" (ArmSpecs), an arm with no text of its own (the app's: a flag set, not a typed SPEC)
    said by its flags on the base run's device, an empty thread count as this process's own ('threads=2 (default)'),
    a flag the arms differ in said by both ('oneDNN (mkldnn)=off' against '...=on', not against nothing)."""
    try:
        kind = resolve_device(params["base"].device).type
    except Exception:  # noqa: BLE001 - a device that is not there is the job's own error, said in its place
        kind = "cuda" if str(params["base"].device).startswith("cuda") else "cpu"
    default = pristine_state().flags.num_threads
    a, b = params["a"], params["b"]
    return tuple(arm if arm.text else dataclasses.replace(arm, text=arm.flags.describe(kind, default_threads=default,
                                                                                        beside=other.flags))
                 for arm, other in ((a, b), (b, a)))


# -- the runners: one per job kind (measure/jobs.py names them) ------------------------------------------------

def probe_job(params: dict, ctx: JobContext) -> tuple[Any, dict]:
    """-> (DeviceReport, {"applicability": {device kind: {flag: (ok, why)}}})."""
    return probe_device(), {"applicability": applicability_table()}


def catalogue_job(params: dict, ctx: JobContext) -> tuple[Any, dict]:
    return list_models(), {}


def analyse_job(params: dict, ctx: JobContext) -> tuple[Any, dict]:
    """params: model, input_shape (with the batch; None: the model's default at `batch`), batch, dtype, step ("train":
    the backward counted too, per layer), layers (the per-layer table too), model_args, seq_len. Progress "note": the
    line saying a custom model's input shape was assumed, once it built. -> (Complexity, {"entry": its ModelEntry,
    "input_note": that line or None})."""
    # torch and numpy: loaded once this process has set its CPUs (measure/process.py)
    from torchperf_tui.engine.workloads.complexity import analyse_complexity
    # torch and numpy: loaded once this process has set its CPUs (measure/process.py)
    from torchperf_tui.engine.workloads.models import resolve_model

    entry = resolve_model(params["model"])
    inputs = analysed_inputs(params, params.get("input_shape"))
    result = analyse_complexity(params["model"], inputs.shape, dtype=params["dtype"], layers=params.get("layers", True),
                                step=params.get("step", "infer"), inputs=inputs,
                                model_args=tuple(params.get("model_args", ())))
    note = say_assumed_input(params["model"], params.get("input_shape") is not None, ctx)  # once it built: no noise
    return result, {"entry": entry, "input_note": note}


def timing_job(params: dict, ctx: JobContext) -> tuple[Any, dict]:
    """params: cfg (BenchConfig). Progress "note": the setup's (say_setup_notes), and the line saying a custom model's
    input shape was assumed, once it ran. Streams Samples. On a GPU the result carries its input copy's estimate from
    the kept ceilings. -> (TimingResult, {"fingerprint": ...})."""
    # numpy: loaded once this process has set its CPUs (measure/process.py)
    from torchperf_tui.engine.measurements.timing import run_benchmark

    cfg = params["cfg"]
    say_setup_notes(cfg, ctx)
    stream = SampleStream(ctx, every_s=send_every_s(cfg))
    try:
        result = run_benchmark(cfg, on_sample=stream.on_sample, should_cancel=ctx.cancelled,
                               on_shape=stream.on_shape, on_memory=stream.on_memory)
    finally:
        stream.close()
    say_assumed_input(cfg.model, cfg.input_shape is not None, ctx)  # once the model ran: a failure says only itself
    if result.quantized is not None and result.stats is not None:
        result.prediction = quant_prediction(result.config, result.quantized, result.device)
        result.predicted_ratio = ratio_of_quantized(result.prediction, result.stats.p50_ms)
    result.input_copy = input_copy_of(result)  # on a GPU, from the ceilings kept for it; None on a CPU
    return result, history_extra(result)


def quant_prediction(run, report, device: str):
    """What the measured ceilings kept for `device` predict of `report`'s scheme (the layers it converted) on `run`;
    a prediction that cannot be made says why instead of failing the run it stands beside."""
    try:
        return prediction_for(run, report.scheme, device, kept_for(device), report.converted)
    except TorchperfError as exc:
        return QuantPrediction(scheme=report.scheme, dtype=run.dtype, missing=str(exc))


def ab_prediction(result) -> None:
    """An A/B of a quantization scheme against none: its prediction, and the predicted B/A beside the measured one."""
    quantized = [arm for arm in (result.a, result.b) if arm.quant is not None]
    if len(quantized) != 1 or quantized[0].quantized is None:
        return
    arm = quantized[0]
    other = result.b if arm is result.a else result.a
    result.prediction = quant_prediction(arm.config, arm.quantized, result.device)
    ratio = result.prediction.ratio(other.median_ms) if other.median_ms else None
    result.predicted_ratio = None if ratio is None else (ratio if arm is result.b else 1.0 / ratio)


def ab_job(params: dict, ctx: JobContext) -> tuple[Any, dict]:
    """params: base (BenchConfig), a, b (ArmSpecs: a typed SPEC's, or a flag set's with no text: arms_said), blocks,
    per_block (None: as the time budget allows), seed, time_budget_s, aa (identical arms allowed), remedy (what the
    refusal of identical arms tells to do instead, in the words of the front end that asked). Progress "block":
    (arm, index, total, samples_ms). -> (ABResult, {"fingerprint": ...})."""
    # numpy: loaded once this process has set its CPUs (measure/process.py)
    from torchperf_tui.engine.measurements.abtest import run_ab

    base, (arm_a, arm_b) = params["base"], arms_said(params)
    if not params.get("aa"):  # as they resolve here: threads=2 against '' where 2 is the default is one set-up
        refuse_same_arms(base, arm_a, arm_b, params.get("remedy", AA_REMEDY))
    result = run_ab(base, arm_a, arm_b, blocks=params["blocks"], per_block=params["per_block"], seed=params["seed"],
                    should_cancel=ctx.cancelled, time_budget_s=params.get("time_budget_s"),
                    on_block=lambda arm, i, n, samples: ctx.progress("block", (arm, i, n, list(samples))))
    ab_prediction(result)
    return result, history_extra(result)


def modes_job(params: dict, ctx: JobContext) -> tuple[Any, dict]:
    """params: cfg (BenchConfig), modes (default all three), cold_l2, per_block. Progress "note": the setup's
    (say_setup_notes); "mode": (mode, done, total), at most twice a second and at each change of mode (a tiny model
    takes thousands of samples a second). -> (ModesResult, {})."""
    # numpy: loaded once this process has set its CPUs (measure/process.py)
    from torchperf_tui.engine.measurements.timing_modes import DEFAULT_PER_BLOCK, MODES, run_modes

    cfg = params["cfg"]
    say_setup_notes(cfg, ctx)
    last = {"mode": None, "at": 0.0}

    def progress(mode: str, done: int, total: int) -> None:
        now = time.monotonic()
        if mode != last["mode"] or now - last["at"] >= SEND_EVERY_S or done == total:
            last.update(mode=mode, at=now)
            ctx.progress("mode", (mode, done, total))

    return run_modes(cfg, tuple(params.get("modes", MODES)), cold_l2=params.get("cold_l2", False),
                     per_block=params.get("per_block", DEFAULT_PER_BLOCK), should_cancel=ctx.cancelled,
                     on_progress=progress), {}


def kernels_job(params: dict, ctx: JobContext) -> tuple[Any, dict]:
    """params: base (BenchConfig), a, b (ArmSpecs, as the "ab" job's), aa, remedy. -> (KernelComparison, {})."""
    # torch and numpy: loaded once this process has set its CPUs (measure/process.py)
    from torchperf_tui.engine.analysis.kernels import conv_kernels

    base, (arm_a, arm_b) = params["base"], arms_said(params)
    if not params.get("aa"):
        refuse_same_arms(base, arm_a, arm_b, params.get("remedy", AA_REMEDY))
    return conv_kernels(base, arm_a, arm_b, should_cancel=ctx.cancelled), {}


def why_job(params: dict, ctx: JobContext) -> tuple[Any, dict]:
    """params: cfg (BenchConfig), options (advise's keyword arguments: budget_s, verify, threshold_pct, blocks).
    Progress "note": each measurement as it starts. -> (Advice, {"fingerprint": ...}: the environment, for its
    report)."""
    # torch and numpy: loaded once this process has set its CPUs (measure/process.py)
    from torchperf_tui.engine.analysis.advisor import advise

    cfg = params["cfg"]
    say_setup_notes(cfg, ctx)
    result = advise(cfg, should_cancel=ctx.cancelled, on_progress=lambda line: ctx.progress(NOTE, line),
                    **params.get("options", {}))
    return result, {"fingerprint": environment_fingerprint(device=result.device)}


def throughput_job(params: dict, ctx: JobContext) -> tuple[Any, dict]:
    """params: cfg, options (find_max_batch's keyword arguments). Progress "batch_try": a BatchTry."""
    # numpy: loaded once this process has set its CPUs (measure/process.py)
    from torchperf_tui.engine.measurements.throughput import find_max_batch

    result = find_max_batch(params["cfg"], **params.get("options", {}),
                            on_progress=lambda t: ctx.progress("batch_try", t), should_cancel=ctx.cancelled)
    return result, history_extra(result)  # the fingerprint: --mlflow's tags


def slo_job(params: dict, ctx: JobContext) -> tuple[Any, dict]:
    """params: cfg, slo (core/slo.Slo), options (find_slo_batch's keyword arguments). Progress "slo_point": a
    SloPoint, as each batch is timed."""
    # numpy: loaded once this process has set its CPUs (measure/process.py)
    from torchperf_tui.engine.measurements.throughput import find_slo_batch

    result = find_slo_batch(params["cfg"], params["slo"], **params.get("options", {}),
                            on_point=lambda point: ctx.progress("slo_point", point), should_cancel=ctx.cancelled)
    return result, {}


def profile_job(params: dict, ctx: JobContext) -> tuple[Any, dict]:
    """params: cfg, iters, sort_by (None: self time on the model's device), trace_path (None: a temp folder).
    -> (ProfileResult, {})."""
    # Kineto's log lines on fd 2 go to this process's log (measure/process.py), not to the CLI's stderr.
    return profile_model(params["cfg"], iters=params["iters"], sort_by=params.get("sort_by"),
                         trace_path=params.get("trace_path"), should_cancel=ctx.cancelled), {}


def roofline_job(params: dict, ctx: JobContext) -> tuple[Any, dict]:
    """params: result (a finished TimingResult), report (the DeviceReport; None: probed here on CUDA), peak_tflops,
    peak_bandwidth_gbs (the user's, where a peak cannot be derived), measured (the ceilings to use; by default those
    kept for the run's device). -> (Roofline, {})."""
    return roofline_of_run(params["result"], params.get("report"), **roofline_options(params)), {}


def layer_times_job(params: dict, ctx: JobContext) -> tuple[Any, dict]:
    """params: as the "roofline" job's, and iters (passes profiled; None: the engine's default). The run's roofline
    with each layer's time (None when cancelled before a pass). -> (Roofline | None, {})."""
    return layer_times_of_run(params["result"], params.get("report"), iters=params.get("iters"),
                              should_cancel=ctx.cancelled, **roofline_options(params)), {}


def roofline_options(params: dict) -> dict:
    """The "roofline" and "layer_times" jobs' peaks and ceilings, as roofline_of_run takes them."""
    options = {"peak_tflops": params.get("peak_tflops"), "peak_bandwidth_gbs": params.get("peak_bandwidth_gbs")}
    if "measured" in params:
        options["measured"] = params["measured"]
    return options


def determinism_job(params: dict, ctx: JobContext) -> tuple[Any, dict]:
    """params: cfg (BenchConfig; its input None: the model's default), runs (default 2). -> (DeterminismReport, {})."""
    return determinism_of(params["cfg"], runs=params.get("runs", 2)), {}


def memsnap_job(params: dict, ctx: JobContext) -> tuple[Any, dict]:
    """params: cfg (BenchConfig), iters (None: the engine's default), out_dir (None: a temp folder).
    -> (MemorySnapshotResult, {})."""
    options = {"iters": params["iters"]} if params.get("iters") is not None else {}
    return record_memory_snapshot(params["cfg"], out_dir=params.get("out_dir"), should_cancel=ctx.cancelled,
                                  **options), {}


def ceilings_kept_job(params: dict, ctx: JobContext) -> tuple[Any, dict]:
    """params: device. The ceilings kept for it (engine.hardware.ceilings), or None: nothing is measured. A ceilings
    file that is corrupt is taken as none kept, its line a Progress "note" and extra["corrupt"] (the CLI's roofline
    says it as a note and goes on without; the app's Device tab says it as its error); a path that is no file to read
    fails the job."""
    corrupt: list[str] = []

    def said(line: str) -> None:
        corrupt.append(line)
        ctx.progress(NOTE, line)

    kept = kept_for(params.get("device", "auto"), on_corrupt=said)
    return kept, {"corrupt": corrupt[0]} if corrupt else {}


def ceilings_job(params: dict, ctx: JobContext) -> tuple[Any, dict]:
    """params: device, refresh (measure again even where ceilings are kept), threads (a CPU's: at that count alone,
    kept under it; None: the process's count and all logical cores). The kept ceilings, or measured now (and kept).
    Progress "ceiling": what is being measured. -> (CeilingsResult, {})."""
    threads = params.get("threads")
    options = {"threads": (threads,)} if threads is not None else {}
    with applied_flags(Flags(num_threads=threads)):  # a CPU's ceilings are kept under the thread count in effect
        return ceilings(params.get("device", "auto"), refresh=params.get("refresh", False), should_cancel=ctx.cancelled,
                        on_progress=lambda what: ctx.progress("ceiling", what), **options), {}


def release_job(params: dict, ctx: JobContext) -> tuple[Any, dict]:
    """params: device ("cpu", "cuda", "cuda:N"). gc + empty_cache (CUDA) or malloc_trim (CPU), here, where
    the model and the caching allocator live. -> ReleaseReport."""
    return release_memory(device=params.get("device", "auto")), {}


def memory_job(params: dict, ctx: JobContext) -> tuple[Any, dict]:
    """The allocator's readings and this process's RSS now: {"pid", "rss", "allocated", "reserved", "peak"}
    (allocator figures None without CUDA)."""
    import os

    import psutil

    reading: dict[str, Any] = {"pid": os.getpid(), "rss": psutil.Process().memory_info().rss,
                               "allocated": None, "reserved": None, "peak": None, "at": time.time(),
                               "why_none": "no CUDA device here: the model runs on the CPU"}
    if torch.cuda.is_available() and not torch.cuda.is_initialized():
        reading.update(allocated=0, reserved=0, peak=0)  # no CUDA work yet: nothing allocated
    elif torch.cuda.is_available():
        reading.update(allocated=torch.cuda.memory_allocated(), reserved=torch.cuda.memory_reserved(),
                       peak=torch.cuda.max_memory_allocated())
    return reading, {}


def sweep_job(params: dict, ctx: JobContext) -> tuple[Any, dict]:
    """params: cfg (BenchConfig), seq_lens (LO, HI), arms (None or two ArmSpecs), options (run_sweep's keywords).
    Progress "sweep_point": each SweepPoint as it is measured. -> (SweepResult, {})."""
    result = run_sweep(params["cfg"], *params["seq_lens"], arms=params.get("arms"), **params.get("options", {}),
                       on_point=lambda point: ctx.progress("sweep_point", point), should_cancel=ctx.cancelled)
    return result, history_extra(result)  # the fingerprint: --mlflow's tags


def collectives_job(params: dict, ctx: JobContext) -> tuple[Any, dict]:
    """params: spec (CollectivesSpec). Progress "note": what was chosen for an unsaid device; "collective_point": each
    CollectivePoint once every rank has timed its size; "collective_progress": (op, size, done, total), about once a
    second from rank 0. -> (CollectivesResult, {})."""
    return run_collectives(params["spec"], on_point=lambda point: ctx.progress("collective_point", point),
                           on_progress=lambda *at: ctx.progress("collective_progress", at),
                           on_note=lambda line: ctx.progress(NOTE, line), should_cancel=ctx.cancelled), {}


def ddp_job(params: dict, ctx: JobContext) -> tuple[Any, dict]:
    """params: spec (DdpSpec). Progress "note": what was chosen for an unsaid device; "ddp_progress": (phase, done,
    total) of the first steps, the warm-up or the timed rounds, about once a second from rank 0. -> (DdpResult, {})."""
    return run_ddp(params["spec"], on_progress=lambda *at: ctx.progress("ddp_progress", at),
                   on_note=lambda line: ctx.progress(NOTE, line), should_cancel=ctx.cancelled), {}


def analysed_inputs(params: dict, input_shape: tuple | None):
    """What an analysis feeds the model (an InputSpec): `input_shape` (with the batch) or the model's default at
    params' batch, its sequence length and overrides (importing the model's module: here)."""
    return BenchConfig(model=params["model"], input_shape=input_shape, batch=params.get("batch"),
                       seq_len=params.get("seq_len"), model_args=tuple(params.get("model_args", ()))).input_spec()


def say_assumed_input(model: str, shape_given: bool, ctx: JobContext) -> str | None:
    """The line (and a Progress "note") when no shape was given and a custom model declares none:
    its input is assumed, which a user must be told rather than find out from odd figures. Called once the model
    has built: a model that fails is said in its error line alone."""
    if shape_given:
        return None
    # torch and numpy: loaded once this process has set its CPUs (measure/process.py)
    from torchperf_tui.engine.workloads.models import input_shape_note

    note = input_shape_note(model)
    if note:
        ctx.progress(NOTE, note)
    return note
