"""Warm-up, then a timed loop: per-iteration CUDA events (GPU) or perf_counter_ns (CPU), streamed, cancellable.

Every iteration is synchronised, so each sample is the latency of one forward pass, not the launch time.
The first iteration is kept apart: it holds one-off costs (cudnn.benchmark's autotuning, oneDNN primitive
creation, lazy CUDA module loading) that would otherwise pollute the distribution.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Callable

import numpy as np

from torchperf_tui.engine.measurements.watched import watched
from torchperf_tui.engine.measurements.bench_config import DEFAULT_ITERS, BenchConfig
from torchperf_tui.engine.workloads.input_facts import InputFacts
from torchperf_tui.core.errors import ModelError, ShapeError, TorchperfError
from torchperf_tui.engine.measurements.flags import Flags, StateWatch, applied_flags, asked_state
from torchperf_tui.engine.hardware.gpu_tenants import tenant_marks
from torchperf_tui.engine.hardware.host_noise import HostNoise, HostProbe, noise_marks
from torchperf_tui.engine.hardware.input_copy import InputCopy
from torchperf_tui.engine.workloads.input_spec import InputSpec, OnShape, ShapeFeed
from torchperf_tui.engine.workloads.inputs import check_dims, dtype_name
from torchperf_tui.engine.hardware.lazy_torch import torch
from torchperf_tui.engine.measurements.memory_trace import MemoryTrace, OnMemory
from torchperf_tui.engine.hardware.condition_sampler import conditions_sampler
from torchperf_tui.engine.hardware.run_conditions import RunConditions
from torchperf_tui.engine.workloads.shapes import ShapeReport, ShapeSchedule, parse_schedule, shape_report
from torchperf_tui.core.stats import TimingStats, compute_stats, items_per_second, percentile_intervals

OnSample = Callable[[str, int, int, float], None]
ShouldCancel = Callable[[], bool]
BeforeIteration = Callable[[str, int], None]

# "Until stable" warm-up: stop when the median of the last window is within this fraction of the one
# before it; bounded in iterations and seconds so a noisy box cannot warm up forever.
STABLE_WINDOW = 5
STABLE_TOLERANCE = 0.02
STABLE_MAX_ITERS = 200
STABLE_MAX_SECONDS = 10.0

from torchperf_tui.engine.measurements.compile_cost import COMPILE_MODES, CompileCost, compile_model, time_eager  # noqa: F401
from torchperf_tui.engine.measurements.compile_cache import CompileCache
from torchperf_tui.engine.measurements.warm_compile import WarmStart, compile_warm, warm_start_of
from torchperf_tui.engine.measurements.train_step import StepRunner, grad_context
from torchperf_tui.engine.workloads.workload import forward_errors, prepare_workload
from torchperf_tui.engine.workloads.quantization import QuantReport
from torchperf_tui.engine.measurements.drift import Drift, Reference, changes_numerics, forward_output


@dataclass
class LoopTimes:
    """Raw output of the timed loop."""

    first_iter_ms: float | None = None
    warmup_ms: list[float] = field(default_factory=list)
    samples_ms: list[float] = field(default_factory=list)
    cancelled: bool = False
    budget_stopped: bool = False  # the timed iterations ran out of their time budget before `iters`
    warmup_stopped: bool = False  # the warm-up ran out of the time budget before its count (or, 'auto', settling)


@dataclass
class TimingResult(InputFacts):
    """One timing run: every sample, under exactly one set of flags."""

    model: str
    device: str
    input_shape: tuple[int, ...]
    dtype: str
    channels_last: bool
    flags: Flags
    first_iter_ms: float | None
    warmup_ms: list[float]
    samples_ms: list[float]
    stats: TimingStats | None
    cancelled: bool
    started_at: float
    duration_s: float
    timer: str  # "cuda-events" or "perf_counter"
    compile_mode: str | None = None  # what was asked for
    compiled: bool = False  # whether the timed iterations ran the compiled model
    compile_s: float | None = None  # compilation (first call of the compiled model), kept out of the samples
    compile_error: str | None = None  # why compilation failed; the samples are then eager
    compile_cost: CompileCost | None = None  # dynamo's counters, the eager run, the break-even (compile_cost.py)
    shapes: str = "fixed"  # the schedule the timed iterations followed
    sample_shapes: list[tuple[int, ...]] = field(default_factory=list)  # the input shape of each timed sample
    sample_first_seen: list[bool] = field(default_factory=list)  # per timed sample: its shape met for the first time
    repeat_stats: TimingStats | None = None  # the timed samples whose shape had been seen before
    shape_report: ShapeReport | None = None  # per-shape first-call cost (None: no iteration ran)
    memory_trace: list[tuple[float, int, int]] = field(default_factory=list)  # (s, allocated, reserved) per iteration
    memory_kind: str = ""  # "cuda-allocator" (allocated, reserved) or "rss" (process RSS in both)
    flags_in_effect: Flags | None = None  # read from torch inside the run's flags context, after the loop
    step: str = "infer"  # what one iteration did: "infer" or "train"
    optimizer: str | None = None  # a training step's optimizer
    amp: str | None = None  # mixed precision: None, "fp16" or "bf16"
    loss: str | None = None  # a training step's loss (engine.measurements.train_step: cross-entropy or the sum of outputs)
    # CUDA, a training step: the allocator's peak over the warm-up and timed steps (activations kept for the
    # backward, gradients, optimizer state), and over one forward pass without gradients before them.
    step_peak_bytes: int | None = None
    forward_peak_bytes: int | None = None
    iters_asked: int | None = None  # the timed iterations asked for
    time_budget_s: float | None = None  # the budget of the warm-up and timed iterations together
    budget_stopped: bool = False  # it stopped the timed iterations early
    warmup_asked: int | str | None = None  # the warm-up asked for: a count, or "auto"
    warmup_stopped: bool = False  # it ended the warm-up early (then one timed iteration ran, or a few)
    # A CUDA run: the GPU's clocks, throttling, temperature, power and energy over the timed iterations.
    conditions: RunConditions | None = None
    # What the model's code changed in torch's global state (threads, flags) during the run, each said once and
    # put back (engine.measurements.flags.StateWatch): a run with notes was not measured, or not wholly, under its flags.
    state_notes: list[str] = field(default_factory=list)
    threads_asked: int | None = None  # the intra-op threads the run set: its flags' count, else the process's own
    # The host over the timed iterations (load, other processes' CPU) and the spread of the samples
    # (engine/hardware/host_noise.py); `app_marks`: what the app saw happen beside the run (a resize, heavy redraws), set by
    # the UI process when the result reaches it. Both end up in the history record's `disturbed`.
    host_noise: HostNoise | None = None
    app_marks: list[str] = field(default_factory=list)
    # What was measured, as resolved (the device, the input shape with its batch, the dtype): a follow-up of this run
    # (its roofline, the time of each layer) measures it again from here, not from fields copied back into a config.
    config: BenchConfig | None = None
    quantized: QuantReport | None = None  # what the run's quantization scheme converted, and what it left
    drift: Drift | None = None  # a run that changes numerics: its outputs against the float32 model's
    # A quantized run: what the measured ceilings predict of its scheme per Linear (engine/analysis/
    # quant_prediction.QuantPrediction), and the pass's predicted time quantized over as it is.
    prediction: Any = None
    predicted_ratio: float | None = None
    # The bytes of one timed iteration's inputs, as made on the device (the mean where the shapes vary), and on a GPU
    # what copying them from the host would cost (engine/hardware/input_copy.py: an estimate from the kept ceilings,
    # set in the measurement process where they are read; None on a CPU).
    input_bytes: int | None = None
    input_copy: InputCopy | None = None

    @property
    def batch(self) -> int:
        return self.input_shape[0]

    @property
    def threads_used(self) -> int | None:
        """The intra-op thread count torch reported in the run (the flags' own count when not read)."""
        in_effect = getattr(self, "flags_in_effect", None)
        return in_effect.num_threads if in_effect is not None else self.flags.num_threads

    def flags_text(self) -> str:
        """The flags as asked, with the thread count the run used: 'threads=2 (default)'."""
        return self.flags.describe(self.device, threads_used=self.threads_used,
                                   default_threads=getattr(self, "threads_asked", None))

    def disturbance_marks(self) -> list[str]:
        """Every reason the numbers may not be the model's alone, one line each: what the app saw, the host, then the
        GPU's other processes."""
        return [*self.app_marks, *noise_marks(self.host_noise), *tenant_marks(self.conditions)]

    def to_dict(self) -> dict:
        data = asdict(self)
        del data["config"]  # its fields are the result's own, said above (the JSON keeps its keys)
        data["conditions"] = self.conditions.to_dict() if self.conditions is not None else None
        data["input_shape"] = list(self.input_shape)
        data["flags"] = self.flags.to_dict()
        data["sample_shapes"] = [list(shape) for shape in self.sample_shapes]
        data["shape_report"] = self.shape_report.to_dict() if self.shape_report else None
        data["memory_trace"] = [list(point) for point in self.memory_trace]
        data["percentiles"] = [asdict(interval) for interval in percentile_intervals(self.samples_ms)]
        data["host_noise"] = self.host_noise.to_dict() if self.host_noise is not None else None
        data["compile_cost"] = self.compile_cost.to_dict() if self.compile_cost is not None else None
        data["disturbance_marks"] = self.disturbance_marks()
        data["quant"] = self.config.quant if self.config is not None else None
        data["attn"] = self.config.attn if self.config is not None else None
        data["quantized"] = self.quantized.to_dict() if self.quantized is not None else None
        data["prediction"] = self.prediction.to_dict() if self.prediction is not None else None
        return data


def _cuda_sample(fn: Callable[[], object]) -> float:
    start = torch.cuda.Event(enable_timing=True)
    end = torch.cuda.Event(enable_timing=True)
    start.record()
    fn()
    end.record()
    end.synchronize()
    return float(start.elapsed_time(end))


def _cpu_sample(fn: Callable[[], object]) -> float:
    t0 = time.perf_counter_ns()
    fn()
    return (time.perf_counter_ns() - t0) / 1e6


def sample_clock(device: torch.device) -> Callable[[Callable[[], object]], float]:
    """How one call is timed on `device`, in ms: CUDA events around it on a GPU, perf_counter on the CPU."""
    return _cuda_sample if device.type == "cuda" else _cpu_sample


def _wall_sample(fn: Callable[[], object], device: torch.device) -> float:
    """Wall time with synchronisation: for the first iteration, whose one-off work is partly on the host."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    t0 = time.perf_counter_ns()
    fn()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return (time.perf_counter_ns() - t0) / 1e6


def _is_stable(warmup_ms: list[float]) -> bool:
    if len(warmup_ms) < 2 * STABLE_WINDOW:
        return False
    last = float(np.median(warmup_ms[-STABLE_WINDOW:]))
    before = float(np.median(warmup_ms[-2 * STABLE_WINDOW:-STABLE_WINDOW]))
    return abs(last - before) <= STABLE_TOLERANCE * before


def run_timed_loop(fn: Callable[[], object], *, device: torch.device | str = "cpu", warmup: int | str = 10,
                   iters: int = DEFAULT_ITERS, on_sample: OnSample | None = None,
                   should_cancel: ShouldCancel | None = None,
                   before_iteration: BeforeIteration | None = None, budget_s: float | None = None) -> LoopTimes:
    """Time `fn` (one forward pass): one first iteration, the warm-up, then `iters` timed iterations.

    `on_sample(phase, index, total, ms)` is called after every iteration (total is 0 for an "auto" warm-up);
    `should_cancel()` is checked between iterations, and a cancelled loop returns what it has so far.
    `before_iteration(phase, index)` runs before each iteration, outside the timer (a new input shape,
    a memory sample). With `budget_s`, the loop stops once it has taken that long in wall time, counted from its
    first iteration: a warm-up still going stops there (`warmup_stopped`), and the timed iterations stop after the
    first one that ends past it (`budget_stopped`), however few that leaves.
    """
    device = torch.device(device)
    if iters < 1:
        raise TorchperfError(f"iterations must be at least 1, got {iters}")
    if device.type == "cuda" and device.index is not None:
        # Events and syncs go to the current device, which is per thread: a worker thread starts on cuda:0.
        with torch.cuda.device(device):
            return run_timed_loop(fn, device="cuda", warmup=warmup, iters=iters, on_sample=on_sample,
                                  should_cancel=should_cancel, before_iteration=before_iteration, budget_s=budget_s)
    sample = sample_clock(device)
    emit = on_sample or (lambda phase, index, total, ms: None)
    cancelled = should_cancel or (lambda: False)
    before = before_iteration or (lambda phase, index: None)
    out = LoopTimes()
    loop_start = time.perf_counter()

    def spent() -> bool:
        return budget_s is not None and time.perf_counter() - loop_start >= budget_s

    if cancelled():
        out.cancelled = True
        return out
    before("first", 0)
    out.first_iter_ms = _wall_sample(fn, device)
    emit("first", 0, 1, out.first_iter_ms)

    auto = warmup == "auto"
    if not auto and (not isinstance(warmup, int) or warmup < 0):
        raise TorchperfError(f"warm-up must be a count >= 0 or 'auto', got {warmup!r}")
    warm_total = 0 if auto else int(warmup)
    warm_start = time.perf_counter()
    while True:
        if auto:
            if (_is_stable(out.warmup_ms) or len(out.warmup_ms) >= STABLE_MAX_ITERS
                    or time.perf_counter() - warm_start > STABLE_MAX_SECONDS):
                break
        elif len(out.warmup_ms) >= warm_total:
            break
        if spent():  # the budget covers the warm-up: a long one (or a slow model) ends here, and the run says so
            out.warmup_stopped = True
            break
        if cancelled():
            out.cancelled = True
            return out
        before("warmup", len(out.warmup_ms))
        ms = sample(fn)
        out.warmup_ms.append(ms)
        emit("warmup", len(out.warmup_ms) - 1, warm_total, ms)

    for i in range(iters):
        if cancelled():
            out.cancelled = True
            return out
        before("timed", i)
        ms = sample(fn)
        out.samples_ms.append(ms)
        emit("timed", i, iters, ms)
        if i + 1 < iters and spent():
            out.budget_stopped = True
            break
    return out


def run_benchmark(cfg: BenchConfig, on_sample: OnSample | None = None,
                  should_cancel: ShouldCancel | None = None, on_shape: OnShape | None = None,
                  on_memory: OnMemory | None = None, warm_start: WarmStart | None = compile_warm) -> TimingResult:
    """Build the model (weights=None), make the input, and time it under `cfg.flags`, restored afterwards.

    With a varying shape schedule the timed iterations change their input before each one (outside the
    timer) and `on_shape(index, shape, first_seen)` is told; the schedule's extreme shapes are checked on
    the meta device first, so a size the model rejects is a ShapeError before anything runs. Memory is
    sampled between iterations (`memory_trace`) and each point is passed to `on_memory(point, kind)` as it
    is taken (kind: see `TimingResult.memory_kind`). What the model's code changes in torch's global state
    (threads, flags) is overridden for the timed iterations where it can be, put back at the end, and said in
    `state_notes`.

    Under torch.compile the model compiles with an empty cache of its own (the cold start: compile_cache.py), and
    once the run is over `warm_start` compiles it again in a second process from the cache it filled (the warm
    start: warm_compile.compile_warm; None: not measured); both first calls, by phase, are in `compile_cost`.
    """
    with CompileCache(cfg.compile) as cache:
        return watched(lambda watch: _run_benchmark(cfg, watch, on_sample, should_cancel, on_shape, on_memory,
                                                    cache, warm_start))


def _run_benchmark(cfg: BenchConfig, watch: StateWatch, on_sample: OnSample | None,
                   should_cancel: ShouldCancel | None, on_shape: OnShape | None,
                   on_memory: OnMemory | None, cache: CompileCache, warm_start: WarmStart | None) -> TimingResult:
    started = time.time()
    plan = cfg.prepare()
    device, dtype, step, shape = plan.device, plan.dtype, plan.step, plan.shape
    schedule = parse_schedule(cfg.shapes, seed=cfg.seed)
    check_schedule_inputs(schedule, plan.inputs)
    timed_shapes = schedule.stream(shape, sequence=plan.inputs.tokens)  # drawn as the iterations go: no list of iters
    if schedule.varies:
        check_schedule_accepted(cfg.model, schedule, plan.inputs, cfg.dtype, cfg.model_args)
    reference = Reference(device.type) if changes_numerics(cfg, device.type) else None
    work = prepare_workload(cfg.model, plan.inputs, device, dtype, cfg.channels_last, seed=cfg.seed,
                            model_args=cfg.model_args, quant=cfg.quant, attn=cfg.attn,
                            before_cast=reference.take if reference is not None else None)
    watch.built()
    drift = None
    feed = ShapeFeed(work.x, plan.inputs, timed_shapes, dtype, device, cfg.channels_last, cfg.seed, on_shape)
    memory = MemoryTrace(device, on_memory)
    sampler = conditions_sampler(device)  # None on the CPU
    host = HostProbe()
    try:
        with applied_flags(cfg.flags), grad_context(step), cache.in_use():
            if reference is not None:  # once, untimed, eager, under the run's own flags and mixed precision
                with forward_errors(cfg.model, shape, dtype, device):
                    drift = reference.drift_of(forward_output(work.model, work.x, step.amp, device.type)[0])
                reference = None
            compiling = compile_model(work.model, work.x, cfg.compile, device)
            runner = StepRunner(work.model, step, device, seed=cfg.seed, forward=compiling.forward)
            work.x = None  # the feed holds the input from here on
            with forward_errors(cfg.model, shape, dtype, device):  # the first pass on CUDA: a rejected input is said
                forward_peak = runner.forward_only_peak(feed.x) if step.training else None

            def before(phase: str, index: int) -> None:
                memory.sample()
                if phase == "timed":
                    if index == 0:
                        host.begin()
                    if sampler is not None:  # outside the timer, like everything in this hook
                        sampler.before_timed("timed", index)
                    feed.advance(index)
                    compiling.before_timed()  # dynamo's frame count: a recompile inside a sample is seen
                feed.passes_started += 1

            with forward_errors(cfg.model, lambda: feed.shape, dtype, device, calls_done=feed.passes_done):
                times = run_timed_loop(lambda: runner(feed.x), device=device, warmup=cfg.warmup,
                                       iters=cfg.iters, on_sample=on_sample, should_cancel=should_cancel,
                                       before_iteration=before, budget_s=cfg.time_budget_s)
                host.end()
                if sampler is not None:
                    sampler.end("timed")
            watch.ran(cfg.flags)
            in_effect = Flags.current()  # what torch itself reported, read once the loop is over
            step_peak = int(torch.cuda.max_memory_allocated(device)) if forward_peak is not None else None
            memory.sample()
            loss_kind = runner.loss_kind
            del runner
            recompiled = compiling.recompiled(len(times.samples_ms))
            eager = (None, 0)
            if compiling.compiled and not schedule.varies and not times.cancelled:  # the baseline: same input
                eager_step = StepRunner(work.model, step, device, seed=cfg.seed)
                eager = time_eager(lambda fn, **kw: run_timed_loop(fn, device=device, **kw),
                                       lambda: eager_step(feed.x), warmup=cfg.warmup, iters=len(times.samples_ms),
                                       budget_s=cfg.time_budget_s, should_cancel=should_cancel)
                del eager_step
    finally:
        feed.x = None
        work.release()
    compiling.forward = None  # the run's model goes before the warm start's second process builds its own
    warm, warm_note = warm_start_of(cfg, cache.environ(), cache.root, compiling, in_effect.num_threads,
                                    times.cancelled, warm_start, should_cancel)
    samples = times.samples_ms
    shapes_done = feed.fed[:len(samples)]
    first_seen = feed.first_seen[:len(samples)]
    report = None
    if times.first_iter_ms is not None:
        iterations = [(shape, times.first_iter_ms), *((shape, ms) for ms in times.warmup_ms),
                      *zip(shapes_done, samples)]
        report = shape_report(schedule, iterations, first_seen)
    repeats = [ms for ms, seen in zip(samples, first_seen) if not seen]
    conditions = sampler.summary("timed", items=sum(s[0] for s in shapes_done)) if sampler is not None else None
    # A sample that held a recompilation measured dynamo and inductor, not the model: kept out, as said.
    kept = [ms for ms, again in zip(samples, recompiled) if not again] if any(recompiled) else samples
    stats = compute_stats(kept, batch=shape[0], first_iter_ms=times.first_iter_ms)
    if stats is not None and schedule.batch_low is not None:
        # The batch varies: items per second is every item over every second, not the configured batch.
        stats = replace(stats, fps=items_per_second(sum(s[0] for s in shapes_done), sum(samples)))
    return TimingResult(
        **cfg.input_facts(plan.inputs),
        model=cfg.model,
        device=str(device),
        input_shape=tuple(shape),
        dtype=dtype_name(dtype),
        channels_last=cfg.channels_last,
        flags=cfg.flags,
        first_iter_ms=times.first_iter_ms,
        warmup_ms=times.warmup_ms,
        samples_ms=samples,
        stats=stats,
        cancelled=times.cancelled,
        flags_in_effect=in_effect,
        started_at=started,
        duration_s=time.time() - started,
        timer="cuda-events" if device.type == "cuda" else "perf_counter",
        compile_mode=cfg.compile,
        compiled=compiling.compiled,
        compile_s=compiling.compile_s,
        compile_error=compiling.error,
        compile_cost=compiling.cost(stats.p50_ms if stats is not None else None, *eager, sum(recompiled),
                                    no_eager=f"shapes vary ({schedule.describe()}): no eager run on one "
                                    "input" if schedule.varies else "cancelled before the eager run",
                                    warm=warm, warm_note=warm_note),
        shapes=schedule.describe(),
        sample_shapes=list(shapes_done),
        sample_first_seen=first_seen,
        repeat_stats=compute_stats(repeats, batch=shape[0]),
        shape_report=report,
        memory_trace=memory.points,
        memory_kind=memory.kind,
        step=step.step,
        optimizer=step.optimizer if step.training else None,
        amp=step.amp,
        loss=loss_kind,
        step_peak_bytes=step_peak,
        forward_peak_bytes=forward_peak,
        iters_asked=cfg.iters,
        time_budget_s=cfg.time_budget_s,
        budget_stopped=times.budget_stopped,
        warmup_asked=cfg.warmup,
        warmup_stopped=times.warmup_stopped,
        conditions=conditions,
        threads_asked=asked_state(cfg.flags).flags.num_threads,
        host_noise=host.summary(samples, spread=not schedule.varies),
        config=replace(cfg, device=str(device), input_shape=tuple(shape), batch=None, dtype=dtype_name(dtype)),
        quantized=work.quantized,
        drift=drift,
        input_bytes=feed.bytes_per_pass,
    )


def check_schedule_inputs(schedule: ShapeSchedule, inputs: InputSpec) -> None:
    """ShapeError when the schedule varies a shape the inputs do not let it vary: a factory's example_inputs."""
    if schedule.varies and inputs.factory is not None:

        raise ShapeError(f"shape schedule {schedule.describe()} varies the input's shape, but {inputs.factory}'s "
                         "example_inputs makes the inputs: use fixed shapes")


def check_schedule_accepted(model: str, schedule: ShapeSchedule, inputs: InputSpec, dtype: str,
                            model_args: tuple = ()) -> None:
    """Run the schedule's smallest and largest shapes through the model on the meta device (no memory,
    milliseconds): a size the model rejects (a ViT's fixed 224, a too-small image) is a ShapeError now,
    not a failure halfway through a run. A model that cannot run on meta at all is not checked."""
    # torch: the app loads this module's results without it
    from torchperf_tui.engine.workloads.complexity import analyse_complexity
    check_schedule_inputs(schedule, inputs)
    for extreme in schedule.extremes(inputs.shape, sequence=inputs.tokens):
        try:
            check_dims(extreme)  # a size past what any tensor holds (random:1-2000000000): said before the run
            inputs.check_shape(extreme)
            analyse_complexity(model, extreme, dtype=dtype, inputs=inputs, model_args=model_args)
        except ShapeError as exc:
            raise ShapeError(f"shape schedule {schedule.describe()}: {exc}") from None
        except ModelError:
            return
