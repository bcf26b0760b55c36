"""What each job kind does in the measurement process: plain calls of the engine, the same functions the
CLI calls, with the job's cancel flag and event stream wired in.

A runner takes the job's params (plain values: a BenchConfig, a Flags, strings) and a JobContext, and
returns (result, extra). It may raise: the main loop turns the exception into one line (JobFailed).
"""

from __future__ import annotations

import threading
import time
from collections import deque
from importlib import import_module
from typing import Any, Callable

from torchperf_tui.engine.measurements.ab_arms import FLIP_REMEDY, refuse_same_arms
from torchperf_tui.engine.measurements.flags import applicability_table, process_baseline
from torchperf_tui.measure.protocol import Progress, Samples
from torchperf_tui.engine.analysis.profiling import profile_model
from torchperf_tui.engine.hardware.ceilings import kept_for
from torchperf_tui.engine.hardware.device import probe_device
from torchperf_tui.engine.hardware.device_choice import resolve_device
from torchperf_tui.engine.hardware.lazy_torch import torch
from torchperf_tui.engine.hardware.telemetry import release_memory
from torchperf_tui.engine.measurements.bench_config import BenchConfig
from torchperf_tui.engine.measurements.ceiling_measurement import ceilings
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
    """Samples from a timed loop, sent in batches of at most one every `every_s` (SEND_EVERY_S, or
    CPU_SEND_EVERY_S for a run on the CPU).

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
        self._last_send = time.monotonic()

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


# -- the runners ------------------------------------------------------------------------------------

def run_probe(params: dict, ctx: JobContext) -> tuple[Any, dict]:
    """-> (DeviceReport, {"applicability": {device kind: {flag: (ok, why)}}})."""
    return probe_device(), {"applicability": applicability_table()}


def run_catalogue(params: dict, ctx: JobContext) -> tuple[Any, dict]:
    return list_models(), {}


def run_analyse(params: dict, ctx: JobContext) -> tuple[Any, dict]:
    """params: spec, batch, dims (the typed shape without batch, or None for the model's default), dtype, step
    ("train": the backward counted too, per layer). -> (Complexity, {"entry": ModelEntry, "input_note": the line
    saying a custom model's input shape was assumed, or None})."""
    # torch and numpy: loaded once this process has set its CPUs (measure/process.py)
    from torchperf_tui.engine.workloads.complexity import analyse_complexity
    # torch and numpy: loaded once this process has set its CPUs (measure/process.py)
    from torchperf_tui.engine.workloads.models import resolve_model

    entry = resolve_model(params["spec"])
    dims = params.get("dims")
    inputs = analysed_inputs(params, (params["batch"], *dims) if dims else None)
    note = say_assumed_input(params["spec"], bool(dims), None)  # the picker takes no progress
    return (analyse_complexity(params["spec"], inputs.shape, dtype=params["dtype"], step=params.get("step", "infer"),
                               inputs=inputs, model_args=tuple(params.get("model_args", ()))),
            {"entry": entry, "input_note": note})


def history_extra(result: Any) -> dict:
    """The environment fingerprint for the run's history records; none for a cancelled run (not saved)."""
    if result.cancelled:
        return {}
    return {"fingerprint": environment_fingerprint(device=result.device)}


def run_time(params: dict, ctx: JobContext) -> tuple[Any, dict]:
    """params: cfg (BenchConfig). Streams Samples. -> (TimingResult, {"fingerprint": ...})."""
    # numpy: loaded once this process has set its CPUs (measure/process.py)
    from torchperf_tui.engine.measurements.timing import run_benchmark

    stream = SampleStream(ctx, every_s=send_every_s(params["cfg"]))
    try:
        result = run_benchmark(params["cfg"], on_sample=stream.on_sample, should_cancel=ctx.cancelled,
                               on_shape=stream.on_shape, on_memory=stream.on_memory)
    finally:
        stream.close()
    return result, history_extra(result)


def run_ab_job(params: dict, ctx: JobContext) -> tuple[Any, dict]:
    """params: base (BenchConfig), a, b (Flags), blocks, per_block, seed. Progress "block": (arm, index,
    total, samples_ms). -> (ABResult, {"fingerprint": ...})."""
    # numpy: loaded once this process has set its CPUs (measure/process.py)
    from torchperf_tui.engine.measurements.abtest import ArmSpec, run_ab

    device_kind = params.get("device_kind", "cpu")
    default = process_baseline().flags.num_threads  # a count left to the process reads 'threads=2 (default)'
    arm_a = ArmSpec(flags=params["a"], text=params["a"].describe(device_kind, default_threads=default))
    arm_b = ArmSpec(flags=params["b"], text=params["b"].describe(device_kind, default_threads=default))
    refuse_same_arms(params["base"], arm_a, arm_b, FLIP_REMEDY)  # an empty threads field is this process's count
    result = run_ab(params["base"], arm_a, arm_b, blocks=params["blocks"], per_block=params["per_block"],
                    seed=params["seed"], should_cancel=ctx.cancelled,
                    on_block=lambda arm, i, n, samples: ctx.progress("block", (arm, i, n, list(samples))))
    return result, history_extra(result)


def run_modes_job(params: dict, ctx: JobContext) -> tuple[Any, dict]:
    """params: cfg (BenchConfig), modes. Progress "mode": (mode, done, total), at most twice a second and at
    each change of mode (a tiny model takes thousands of samples a second). -> (ModesResult, {})."""
    # numpy: loaded once this process has set its CPUs (measure/process.py)
    from torchperf_tui.engine.measurements.timing_modes import MODES, run_modes

    last = {"mode": None, "at": 0.0}

    def progress(mode: str, done: int, total: int) -> None:
        now = time.monotonic()
        if mode != last["mode"] or now - last["at"] >= SEND_EVERY_S or done == total:
            last.update(mode=mode, at=now)
            ctx.progress("mode", (mode, done, total))

    return run_modes(params["cfg"], tuple(params.get("modes", MODES)), should_cancel=ctx.cancelled,
                     on_progress=progress), {}


def run_kernels(params: dict, ctx: JobContext) -> tuple[Any, dict]:
    """params: base (BenchConfig), a, b (Flags), device_kind."""
    # numpy: loaded once this process has set its CPUs (measure/process.py)
    from torchperf_tui.engine.measurements.abtest import ArmSpec
    # torch and numpy: loaded once this process has set its CPUs (measure/process.py)
    from torchperf_tui.engine.analysis.kernels import conv_kernels

    kind = params.get("device_kind", "cpu")
    default = process_baseline().flags.num_threads  # a count left to the process reads 'threads=2 (default)'
    arm_a = ArmSpec(flags=params["a"], text=params["a"].describe(kind, default_threads=default))
    arm_b = ArmSpec(flags=params["b"], text=params["b"].describe(kind, default_threads=default))
    return conv_kernels(params["base"], arm_a, arm_b, should_cancel=ctx.cancelled), {}


def run_throughput(params: dict, ctx: JobContext) -> tuple[Any, dict]:
    """params: cfg, options (find_max_batch's keyword arguments). Progress "batch_try": a BatchTry."""
    # numpy: loaded once this process has set its CPUs (measure/process.py)
    from torchperf_tui.engine.measurements.throughput import find_max_batch

    result = find_max_batch(params["cfg"], **params.get("options", {}),
                            on_progress=lambda t: ctx.progress("batch_try", t), should_cancel=ctx.cancelled)
    return result, history_extra(result)  # the fingerprint: --mlflow's tags


def run_profile(params: dict, ctx: JobContext) -> tuple[Any, dict]:
    """params: cfg, iters."""
    return profile_model(params["cfg"], iters=params["iters"], should_cancel=ctx.cancelled), {}


def run_roofline(params: dict, ctx: JobContext) -> tuple[Any, dict]:
    """params: result (a TimingResult), report (the DeviceReport the UI shows)."""
    return roofline_of_run(params["result"], params.get("report")), {}


def run_layer_times(params: dict, ctx: JobContext) -> tuple[Any, dict]:
    """params: result (a finished TimingResult), report. The run's roofline with each layer's time (None when
    cancelled before a pass)."""
    return layer_times_of_run(params["result"], params.get("report"), should_cancel=ctx.cancelled), {}


def run_determinism(params: dict, ctx: JobContext) -> tuple[Any, dict]:
    """params: cfg (BenchConfig)."""
    return determinism_of(params["cfg"], runs=2), {}


def run_memsnap(params: dict, ctx: JobContext) -> tuple[Any, dict]:
    """params: cfg (BenchConfig)."""
    return record_memory_snapshot(params["cfg"], should_cancel=ctx.cancelled), {}


def run_ceilings_kept(params: dict, ctx: JobContext) -> tuple[Any, dict]:
    """params: device. The ceilings kept for it (engine.hardware.ceilings), or None: nothing is measured."""
    return kept_for(params.get("device", "auto")), {}


def run_ceilings(params: dict, ctx: JobContext) -> tuple[Any, dict]:
    """params: device. Measure the ceilings now and keep them. Progress "ceiling": what is being measured."""
    return ceilings(params.get("device", "auto"), refresh=True, should_cancel=ctx.cancelled,
                    on_progress=lambda what: ctx.progress("ceiling", what)), {}


def run_release(params: dict, ctx: JobContext) -> tuple[Any, dict]:
    """params: device ("cpu", "cuda", "cuda:N"). gc + empty_cache (CUDA) or malloc_trim (CPU), here, where
    the model and the caching allocator live. -> ReleaseReport."""
    return release_memory(device=params.get("device", "auto")), {}


def run_memory(params: dict, ctx: JobContext) -> tuple[Any, dict]:
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


def analysed_inputs(params: dict, input_shape: tuple | None):
    """What an analysis feeds the model (an InputSpec): `input_shape` (with the batch) or the model's default at
    params' batch, its sequence length and overrides (importing the model's module: here)."""
    return BenchConfig(model=params["spec"], input_shape=input_shape, batch=params.get("batch"),
                       seq_len=params.get("seq_len"), model_args=tuple(params.get("model_args", ()))).input_spec()


def say_assumed_input(spec: str, shape_given: bool, ctx: JobContext | None) -> str | None:
    """The line (and, with `ctx`, a Progress "note") when no shape was given and a custom model declares none:
    its input is assumed, which a user must be told rather than find out from odd figures. Called once the model
    has built: a model that fails is said in its error line alone."""
    if shape_given:
        return None
    # torch and numpy: loaded once this process has set its CPUs (measure/process.py)
    from torchperf_tui.engine.workloads.models import input_shape_note

    note = input_shape_note(spec)
    if note and ctx is not None:
        ctx.progress("note", note)
    return note


def run_sweep_job(params: dict, ctx: JobContext) -> tuple[Any, dict]:
    """params: cfg (BenchConfig), seq_lens (LO, HI), arms (None or two ArmSpecs), options (run_sweep's keywords).
    Progress "sweep_point": each SweepPoint as it is measured. -> (SweepResult, {})."""
    result = run_sweep(params["cfg"], *params["seq_lens"], arms=params.get("arms"), **params.get("options", {}),
                       on_point=lambda point: ctx.progress("sweep_point", point), should_cancel=ctx.cancelled)
    return result, history_extra(result)  # the fingerprint: --mlflow's tags


RUNNERS: dict[str, Callable[[dict, JobContext], tuple[Any, dict]]] = {
    "probe": run_probe, "catalogue": run_catalogue, "analyse": run_analyse, "time": run_time, "ab": run_ab_job,
    "kernels": run_kernels, "modes": run_modes_job, "throughput": run_throughput, "profile": run_profile, "roofline": run_roofline,
    "layer_times": run_layer_times,
    "determinism": run_determinism, "memsnap": run_memsnap, "ceilings": run_ceilings,
    "ceilings_kept": run_ceilings_kept, "release": run_release, "memory": run_memory,
}
RUNNERS["sweep"] = run_sweep_job  # the app and the CLI alike


def _lazy(module: str, name: str) -> Callable[[dict, JobContext], tuple[Any, dict]]:
    """measure/`module`.py's runner `name`, imported when its job comes (that module imports this one)."""
    return lambda params, ctx: getattr(import_module(f"torchperf_tui.measure.{module}"), name)(params, ctx)


RUNNERS.update({f"cli.{kind}": _lazy("cli_runners", f"run_cli_{kind}")
                for kind in ("flops", "bench", "profile", "roofline", "compare", "determinism", "memsnap", "ceilings")})
RUNNERS.update({"generate": _lazy("generation_runners", "run_generate"),
                "cli.generate": _lazy("generation_runners", "run_cli_generate"),
                "cli.generate_ab": _lazy("generation_runners", "run_cli_generate_ab")})
