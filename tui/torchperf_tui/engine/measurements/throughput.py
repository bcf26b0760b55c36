"""Throughput: the batch that gives the most samples/s, and the largest batch that fits (engine/measurements/batch_search.py
says how the batch is searched and when the search stops), measured on a real model.

The batch with the best samples/s among the tries (a try's rate is batch / its median latency: it has three
iterations, one slow one must not steer the search) is measured again with more iterations: that measurement,
iterations x batch / total time, is the result's samples/s. If not even batch 1 fits, `find_max_batch` raises
OutOfMemory: a result always has a measured samples/s, unless it was cancelled.

On the CPU nothing raises before the box swaps, so a memory cap (default: half of the RAM available when
the search starts) stands in for the device's capacity (engine/measurements/batch_runner.py estimates each try's need).

With `cfg.step == "train"` every try is a training step (engine/measurements/train_step.py): forward, loss, backward and
the optimizer step, under autocast with `cfg.amp`. The largest batch that fits is then the largest that fits
*for training*: activations are kept for the backward, and gradients and optimizer state are resident too.
The weights train as the search goes (nothing there depends on their values).

Each try and the measurement carry the host over their timed iterations, as a timed run does
(engine/hardware/host_noise.py); the result says a busy host per point ("batch 1 (grow): noisy host: ..."), or over
the whole search where no point's window was long enough to tell.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable

import psutil
from torchperf_tui.engine.hardware.gpu_tenants import tenant_marks
from torchperf_tui.engine.hardware.lazy_torch import torch

from torchperf_tui.engine.measurements.batch_runner import ModelBatchRunner
from torchperf_tui.engine.measurements.batch_search import (DEFAULT_MAX_BATCH, PLATEAU_DOUBLINGS, TRY_ITERS, TRY_WARMUP, BatchTry,
                                               Clock, OnProgress, ShouldCancel, StopRule, TryBatch, best_of, per_s,
                                               run_try, search_max_batch)
from torchperf_tui.engine.measurements.bench_config import BenchConfig
from torchperf_tui.engine.measurements.slo_search import NO_FIT, SloPoint, search_slo
from torchperf_tui.core.slo import Slo
from torchperf_tui.core.stats import samples_needed
from torchperf_tui.engine.workloads.input_facts import InputFacts
from torchperf_tui.engine.workloads.input_spec import InputSpec
from torchperf_tui.core.errors import OutOfMemory, first_line
from torchperf_tui.engine.measurements.flags import applied_flags
from torchperf_tui.engine.workloads.inputs import dtype_name
from torchperf_tui.engine.hardware.nvml import NA, to_jsonable
from torchperf_tui.engine.hardware.telemetry import release_memory
from torchperf_tui.engine.hardware.condition_sampler import ConditionSampler, conditions_sampler
from torchperf_tui.engine.hardware.host_noise import HostNoise, HostProbe, point_marks
from torchperf_tui.engine.hardware.run_conditions import RunConditions
from torchperf_tui.engine.workloads.workload import build_for_run, forward_errors, place_model
from torchperf_tui.engine.workloads.quantization import quantize_model
from torchperf_tui.core.formatting import format_bytes, format_number
from torchperf_tui.engine.measurements.train_step import grad_context

DEFAULT_MEMORY_FRACTION = 0.5  # of the RAM available when a CPU search starts
DEFAULT_TIME_BUDGET_S = 120.0  # search and final measurement together, on any device
SPEED_CHANGE = 2.0  # a measurement this many times off its own try's rate says the machine's speed changed
MEASURE_WARMUP = 3
MEASURE_ITERS = 10


@dataclass
class ThroughputResult(InputFacts):
    model: str
    device: str
    sample_shape: tuple[int, ...]  # one input item, without the batch dimension
    dtype: str
    channels_last: bool
    max_batch: int  # largest batch that fitted among those tried (see limit_found)
    max_batch_bound: int
    hit_bound: bool
    tries: list[BatchTry]
    measurement: BatchTry | None  # the longer run at best_batch
    samples_per_s: float | None  # from `measurement`: iterations x batch / total time, at best_batch
    latency_ms: float | None  # median per-batch latency at best_batch
    memory_cap_bytes: int | NA  # the CPU cap; NA on CUDA (the device's own memory is the limit)
    allocator_before_bytes: int | NA  # torch.cuda.memory_allocated before the search
    allocator_after_bytes: int | NA  # ... and after it, once everything was released
    cancelled: bool
    duration_s: float  # building the model, the search and the measurement
    best_batch: int  # the batch whose try gave the most samples/s: where `measurement` ran (0: none)
    best_try_samples_per_s: float | None  # that try's own rate (batch / its median latency)
    stop_rule: StopRule
    stop_reason: str  # one sentence: what stopped the search, with its numbers
    limit_found: bool  # False: larger batches than max_batch were not all tried and may fit
    first_failure: int | None  # the smallest batch that did not fit
    time_budget_s: float | None
    to_oom: bool  # the plateau rule was off: growth went on to a failure or the bound
    notes: list[str] = field(default_factory=list)
    step: str = "infer"  # what each iteration was: "infer", or "train (sgd)"; " · amp bf16" under autocast
    conditions: RunConditions | None = None  # CUDA: the GPU over the final measurement at best_batch
    # The host over the whole search and measurement (each point has its own: BatchTry.host_noise), and what the
    # app saw beside it (a resize, heavy redraws), set by the UI process when the result reaches it.
    host_noise: HostNoise | None = None
    app_marks: list[str] = field(default_factory=list)

    def disturbance_marks(self) -> list[str]:
        """Every reason the figures may not be the model's alone, one line each: what the app saw, then the host per
        point (each try, the measurement), or over the whole search where no point could tell."""
        points = [*self.tries, *([self.measurement] if self.measurement is not None else [])]
        return [*self.app_marks, *point_marks([(t.label, t.host_noise) for t in points], self.host_noise),
                *tenant_marks(self.conditions)]

    @property
    def points(self) -> list[BatchTry]:
        """The tries that fitted, by batch size: throughput and latency against batch, for a plot."""
        best: dict[int, BatchTry] = {}
        for t in self.tries:
            if t.fits:
                best[t.batch] = t
        return [best[b] for b in sorted(best)]

    @property
    def frontier(self) -> list[dict[str, Any]]:
        """The tries that fitted as the frontier between latency and throughput, by batch, in the keys of a search
        under a latency budget (SloResult's frontier): each try's median of its passes (`p50_ms`), its samples/s
        (`items_per_s`), its memory and passes."""
        return [{"batch": t.batch, "p50_ms": t.latency_ms, "items_per_s": t.samples_per_s, "peak_bytes": t.peak_bytes,
                 "n": t.iters} for t in self.points if t.latency_ms is not None and t.samples_per_s is not None]

    def limit_text(self) -> str:
        """The largest batch that fits, as far as the search knows it: '12 (13 does not fit)', or
        'not searched past 64: stopped by plateau', never a limit the search did not find."""
        if self.max_batch == 0:
            return "none fitted before the search stopped" if self.cancelled else "none"
        if self.limit_found and self.first_failure is not None:
            within = "" if self.first_failure == self.max_batch + 1 else \
                f"; bisected to within {self.first_failure - self.max_batch}"
            return f"{self.max_batch} ({self.first_failure} does not fit{within})"
        stopped = "cancelled" if self.stop_rule == StopRule.CANCELLED else f"stopped by {self.stop_rule}"
        if self.first_failure is not None:
            return f"between {self.max_batch} (fits) and {self.first_failure} (does not): {stopped}"
        return f"not searched past {self.max_batch}: {stopped}"

    def time_text(self) -> str:
        """Time spent, against the budget if there was one."""
        if self.time_budget_s is None:
            return f"{self.duration_s:.1f} s (no time budget)"
        return f"{self.duration_s:.1f} s of the {self.time_budget_s:g} s budget"

    def headline(self) -> str:
        """One plain line: the best rate and its batch, the largest batch that fits, the time spent."""
        rate = (f"best {format_number(self.samples_per_s, digits=1)} samples/s at batch {self.best_batch}"
                if self.samples_per_s is not None else "no measurement")
        return f"{rate} · largest batch that fits: {self.limit_text()} · {self.time_text()}"

    def to_dict(self) -> dict[str, Any]:
        data = to_jsonable(self)
        data["stop_rule"] = self.stop_rule.value
        data["tries"] = [t.to_dict() for t in self.tries]
        data["measurement"] = self.measurement.to_dict() if self.measurement is not None else None
        data["points"] = [p.to_dict() for p in self.points]
        data["frontier"] = to_jsonable(self.frontier)
        data["conditions"] = self.conditions.to_dict() if self.conditions is not None else None
        data["host_noise"] = self.host_noise.to_dict() if self.host_noise is not None else None
        data["disturbance_marks"] = self.disturbance_marks()
        return data


def _activation_bytes_per_sample(cfg: BenchConfig, one: InputSpec) -> int | None:
    """Sum of every layer's output bytes for one sample: an upper bound on live activations under
    inference mode (outputs are freed as soon as the next layer has read them), and about what a training
    step keeps for its backward (its gradients come on top, which the first try's measured growth
    catches). None if analysis fails."""
    # torch: the app loads this module's results without it
    from torchperf_tui.engine.workloads.complexity import analyse_complexity

    try:
        c = analyse_complexity(cfg.model, one.shape, dtype=cfg.dtype, layers=True, inputs=one,
                               model_args=cfg.model_args)
    except Exception:  # noqa: BLE001 - the estimate is a nicety; the measured growth takes over after one try
        return None
    total = sum(layer.output_bytes for layer in c.layers)
    return total or None


def _drop_cublas_workspaces() -> bool:
    """The first matmul gives each stream a cuBLAS workspace from the caching allocator, kept for the life of
    the process; hand them back so the allocator really ends where it started (a private torch function:
    looked up, not assumed)."""
    clear = getattr(torch._C, "_cuda_clearCublasWorkspaces", None)
    if clear is None:
        return False
    clear()
    return True


class BatchSetup:
    """What a search over batches of `cfg`'s model stands on: the model built and placed once (or `try_batch`, a
    seam), its runner, the CPU's memory cap, the GPU's conditions sampler; `close()` drops the model and hands the
    allocator back where it started."""

    def __init__(self, cfg: BenchConfig, plan, memory_cap_bytes: int | None, memory_fraction: float,
                 should_cancel: ShouldCancel | None, try_batch: TryBatch | None) -> None:
        self.cfg, self.plan, self.should_cancel, self.try_batch = cfg, plan, should_cancel, try_batch
        self.device = plan.device
        self.one = plan.inputs.at_batch(1)  # the input of one item: the batch is what is searched
        self.on_cuda = self.device.type == "cuda"
        self.notes: list[str] = []
        self.model = None
        self.cap: int | NA
        if self.on_cuda:
            self.cap = NA("on CUDA the device's own memory is the limit")
            torch.cuda.synchronize(self.device)
            _drop_cublas_workspaces()  # the same footing as the end, where they are dropped too
            self.allocated_before: int | NA = int(torch.cuda.memory_allocated(self.device))
        else:
            if memory_cap_bytes is None:
                memory_cap_bytes = int(psutil.virtual_memory().available * memory_fraction)
                self.notes.append(f"CPU memory cap {format_bytes(memory_cap_bytes)} = {memory_fraction:g} x RAM "
                                  "available at the start; a try estimated or measured over it counts as out of "
                                  "memory")
            self.cap = memory_cap_bytes
            self.allocated_before = NA("no CUDA allocator on the CPU")

    def release(self) -> None:
        release_memory("cuda" if self.on_cuda else "cpu")

    def open(self) -> tuple[TryBatch, ConditionSampler | None]:
        """(the runner of a batch, the GPU's conditions sampler or None): the model built here unless a seam
        runs the batches."""
        if self.try_batch is not None:
            return self.try_batch, None
        cfg, plan, device, dtype, one = self.cfg, self.plan, self.device, self.plan.dtype, self.one
        try:
            self.model = place_model(build_for_run(cfg.model, device, dtype, cfg.model_args, cfg.attn), device,
                                     dtype, cfg.channels_last, one.rank)
            if cfg.quant is not None:
                quantize_model(self.model, cfg.quant)
        except torch.OutOfMemoryError as exc:
            self.release()
            raise OutOfMemory(f"{cfg.model}'s weights alone do not fit on {device}: {first_line(exc)}") from None
        per_sample = None if self.on_cuda else _activation_bytes_per_sample(cfg, one)
        if not self.on_cuda:
            self.release()  # trim first: the runner's RSS baseline must not hold reusable free pages
        sampler = conditions_sampler(device)  # None on the CPU: the GPU over the final measurement
        runner = ModelBatchRunner(self.model, plan.inputs, device=device, dtype=dtype,
                                  channels_last=cfg.channels_last,
                                  memory_cap_bytes=None if self.on_cuda else self.cap,
                                  activation_bytes_per_sample=per_sample, should_cancel=self.should_cancel,
                                  step=plan.step, seed=cfg.seed, sampler=sampler)
        return runner, sampler

    def close(self) -> None:
        self.model = None
        self.release()
        if self.on_cuda and _drop_cublas_workspaces():
            self.release()

    def allocated_after(self) -> int | NA:
        """The CUDA allocator once all is released (said in the notes where it holds more than before)."""
        if not self.on_cuda:
            return self.allocated_before
        torch.cuda.synchronize(self.device)
        after = int(torch.cuda.memory_allocated(self.device))
        if after != self.allocated_before:
            self.notes.append(f"the CUDA allocator holds {format_bytes(after - self.allocated_before)} more than "
                              "before the search (library workspaces created by the first run stay allocated)")
        return after


def find_max_batch(cfg: BenchConfig, *, max_batch: int = DEFAULT_MAX_BATCH, resolution: int = 1,
                   to_oom: bool = False, time_budget_s: float | None = DEFAULT_TIME_BUDGET_S,
                   plateau_doublings: int = PLATEAU_DOUBLINGS,
                   try_warmup: int = TRY_WARMUP, try_iters: int = TRY_ITERS,
                   measure_warmup: int = MEASURE_WARMUP, measure_iters: int = MEASURE_ITERS,
                   memory_cap_bytes: int | None = None, memory_fraction: float = DEFAULT_MEMORY_FRACTION,
                   on_progress: OnProgress | None = None, should_cancel: ShouldCancel | None = None,
                   try_batch: TryBatch | None = None, clock: Clock = time.monotonic) -> ThroughputResult:
    """The batch of `cfg.model` that gives the most samples/s on `cfg.device`, measured again there with
    more iterations, and the largest batch that fits, as far as the search went (see the module docstring).

    `cfg.input_shape`/`cfg.batch` only give the per-sample shape (the batch dimension is searched).
    `to_oom` turns the plateau rule off: growth goes on to a failure or `max_batch`, then bisects.
    `time_budget_s` (None: none) counts from the call, model building and the final measurement included.
    `memory_cap_bytes` (CPU only) defaults to `memory_fraction` of the RAM available now. `try_batch`
    replaces the model runner and `clock` the monotonic clock (seams for tests); by default the model is
    built here and dropped at the end. Raises OutOfMemory when no batch fits, or when even the batches that
    fitted in the search do not in the final measurement: a result that is not cancelled has a samples/s.
    """
    started = clock()
    plan = cfg.prepare()
    device, dtype, step = plan.device, plan.dtype, plan.step
    sample_shape = plan.inputs.sample_shape
    setup = BatchSetup(cfg, plan, memory_cap_bytes, memory_fraction, should_cancel, try_batch)
    one = setup.one
    notes, cap, allocated_before, release = setup.notes, setup.cap, setup.allocated_before, setup.release

    def is_cancelled() -> bool:
        return bool(should_cancel and should_cancel())

    runner, sampler = setup.open()
    # The measurement after the search runs the best batch 1 + warm-up + iterations times, a try 1 + ...:
    # a try is only started if the measurement that may follow it fits in the budget too.
    reserve = (1 + measure_warmup + measure_iters) / (1 + try_warmup + try_iters)
    measurements: list[BatchTry] = []
    host = HostProbe(during="the batch search")  # the whole search, for where no try's own window can tell
    try:
        host.begin()
        with applied_flags(cfg.flags), grad_context(step):
            with forward_errors(cfg.model, one.shape, dtype, device):
                outcome = search_max_batch(runner, max_batch=max_batch, resolution=resolution,
                                           warmup=try_warmup, iters=try_iters, to_oom=to_oom,
                                           plateau_doublings=plateau_doublings, time_budget_s=time_budget_s,
                                           budget_started=started, reserve_factor=reserve, clock=clock,
                                           release=release, on_progress=on_progress, should_cancel=should_cancel)
            if not outcome.cancelled and not is_cancelled():
                measurements = _measure_best(runner, outcome.tries, measure_warmup, measure_iters, release,
                                             on_progress, clock, is_cancelled)
        host.end()
    finally:
        del runner
        setup.close()
    cancelled = outcome.cancelled or is_cancelled()
    if outcome.max_batch == 0 and not cancelled:
        failure = next((t for t in outcome.tries if not t.fits), None)
        raise OutOfMemory(f"{cfg.model}: even batch {outcome.tries[0].batch if outcome.tries else 1} does not "
                          f"fit on {device}: {failure.reason if failure else 'out of memory'}")
    measurement = measurements[-1] if measurements else None
    max_fit, first_failure, limit_found = outcome.max_batch, outcome.first_failure, outcome.limit_found
    for failed in (m for m in measurements if not m.fits):
        notes.append(f"batch {failed.batch} fitted in the search but not in the longer measurement "
                     f"({failed.reason}): counted as not fitting")
        first_failure = min(first_failure or failed.batch, failed.batch)
        if max_fit >= failed.batch:
            max_fit = max((t.batch for t in outcome.tries if t.fits and t.batch < failed.batch), default=0)
            limit_found = limit_found and first_failure - max_fit <= resolution
    if not cancelled and (measurement is None or not measurement.fits or measurement.samples_per_s is None):
        raise OutOfMemory(f"{cfg.model}: no batch that fitted in the search could be measured on {device}: "
                          + "; ".join(f"batch {m.batch}: {m.reason}" for m in measurements if not m.fits))
    allocated_after = setup.allocated_after()
    fitted = measurement if measurement is not None and measurement.fits else None
    conditions = (sampler.summary(measure_window(fitted.batch), items=fitted.iters * fitted.batch)
                  if sampler is not None and fitted is not None and fitted.iters else None)
    best_try = best_of([t for t in outcome.tries if fitted is not None and t.batch == fitted.batch])
    if best_try is not None and fitted.samples_per_s and best_try.samples_per_s:
        ratio = fitted.samples_per_s / best_try.samples_per_s
        if not 1 / SPEED_CHANGE <= ratio <= SPEED_CHANGE:
            # Seen with another process on a 2-core box: the tries compared batches at another speed.
            notes.append(f"the measurement at batch {fitted.batch} gave {per_s(fitted.samples_per_s)}, {ratio:.2g}x "
                         f"its try's {per_s(best_try.samples_per_s)}: the machine's speed changed during the "
                         "search (another process on it?), so the batch picked may not be the best; rerun on a "
                         "quiet machine")
    return ThroughputResult(
        **cfg.input_facts(plan.inputs),
        model=cfg.model, device=str(device), sample_shape=sample_shape, dtype=dtype_name(dtype),
        channels_last=cfg.channels_last, max_batch=max_fit, max_batch_bound=max_batch,
        hit_bound=outcome.hit_bound, tries=outcome.tries, measurement=measurement,
        samples_per_s=fitted.samples_per_s if fitted else None,
        latency_ms=fitted.latency_ms if fitted else None,
        memory_cap_bytes=cap, allocator_before_bytes=allocated_before, allocator_after_bytes=allocated_after,
        cancelled=cancelled, duration_s=clock() - started,
        best_batch=fitted.batch if fitted else 0,
        best_try_samples_per_s=best_try.samples_per_s if best_try is not None else None,
        stop_rule=StopRule.CANCELLED if cancelled else outcome.stop_rule,
        stop_reason=(f"cancelled during the final measurement (the search had stopped by {outcome.stop_rule})"
                     if cancelled and not outcome.cancelled else outcome.stop_reason),
        limit_found=limit_found, first_failure=first_failure, time_budget_s=time_budget_s, to_oom=to_oom,
        notes=notes, step=step.describe(), conditions=conditions,
        host_noise=host.summary([], spread="said per try"),
    )


def measure_window(batch: int) -> str:
    """The label of the final measurement's window at `batch` (engine/hardware/run_conditions.py)."""
    return f"measure{batch}"


def _measure_best(runner: TryBatch, tries: list[BatchTry], warmup: int, iters: int,
                  release: Callable[[], object], on_progress: OnProgress | None, clock: Clock,
                  is_cancelled: ShouldCancel) -> list[BatchTry]:
    """The longer run at the batch whose try gave the most samples/s. Memory noise can still make it fail:
    then the best of the smaller batches is measured instead, and so on. Returns every measurement made,
    the one that counts last (none fitted: no batch could be measured)."""
    candidates = [t for t in tries if t.fits and t.samples_per_s is not None]
    made: list[BatchTry] = []
    while candidates and not is_cancelled():
        best = best_of(candidates)
        if isinstance(runner, ModelBatchRunner):  # the GPU's conditions are read over this run (a try's are not)
            runner.window = measure_window(best.batch)
        try:
            m = run_try(runner, best.batch, "measure", warmup=warmup, iters=iters, clock=clock)
        finally:
            if isinstance(runner, ModelBatchRunner):
                runner.window = None
        if m is None:  # cancelled before one iteration ran
            break
        made.append(m)
        if on_progress is not None:
            on_progress(m)
        if m.fits:
            break
        release()
        candidates = [t for t in candidates if t.batch < m.batch]
    return made


@dataclass
class SloResult(InputFacts):
    """`throughput --slo`: the largest batch within a latency budget at a quantile, and the frontier tried."""

    model: str
    device: str
    sample_shape: tuple[int, ...]
    dtype: str
    channels_last: bool
    slo: Slo
    points: list[SloPoint]  # every batch timed, in the order tried
    chosen: SloPoint | None  # the largest batch that met the budget (None: not even batch 1 did)
    stop_reason: str
    cancelled: bool
    duration_s: float
    time_budget_s: float | None
    max_batch_bound: int
    memory_cap_bytes: int | NA
    notes: list[str] = field(default_factory=list)
    step: str = "infer"
    host_noise: HostNoise | None = None  # over the whole search (each point has its own)
    app_marks: list[str] = field(default_factory=list)
    conditions: RunConditions | None = None  # CUDA: the GPU over every batch's timed passes

    @property
    def frontier(self) -> list[SloPoint]:
        """The batches that ran, by batch: latency against items/s; a batch the time budget cut before its median
        was supported (a cold pass or a few) is among the points tried, not on the frontier."""
        ran = {p.batch: p for p in self.points if p.quantile is not None and p.n >= samples_needed(0.5)}
        return [ran[b] for b in sorted(ran)]

    def disturbance_marks(self) -> list[str]:
        return [*self.app_marks, *point_marks([(p.label, p.host_noise) for p in self.points], self.host_noise),
                *tenant_marks(self.conditions)]

    def to_dict(self) -> dict[str, Any]:
        data = to_jsonable({k: v for k, v in self.__dict__.items()
                            if k not in ("points", "chosen", "slo", "host_noise", "conditions")})
        data["conditions"] = self.conditions.to_dict() if self.conditions is not None else None
        data["slo"] = self.slo.to_dict()
        data["points"] = [p.to_dict() for p in self.points]
        data["frontier"] = [p.to_dict() for p in self.frontier]
        data["chosen"] = self.chosen.to_dict() if self.chosen is not None else None
        data["chosen_batch"] = self.chosen.batch if self.chosen is not None else None
        data["host_noise"] = self.host_noise.to_dict() if self.host_noise is not None else None
        data["disturbance_marks"] = self.disturbance_marks()
        return data


def find_slo_batch(cfg: BenchConfig, slo: Slo, *, max_batch: int = DEFAULT_MAX_BATCH,
                   time_budget_s: float | None = DEFAULT_TIME_BUDGET_S, memory_cap_bytes: int | None = None,
                   memory_fraction: float = DEFAULT_MEMORY_FRACTION,
                   on_point: Callable[[SloPoint], None] | None = None, should_cancel: ShouldCancel | None = None,
                   try_batch: TryBatch | None = None, clock: Clock = time.monotonic) -> SloResult:
    """The largest batch of `cfg.model` whose latency at `slo`'s quantile stays within its budget, each batch timed
    with the passes its quantile needs (engine/measurements/slo_search.py); the model built once, as for
    find_max_batch, whose seams (`try_batch`, `clock`) and memory cap it shares."""
    started = clock()
    plan = cfg.prepare()

    def stop_passes() -> bool:  # a batch's passes end at a cancel or at the end of the time budget
        past = time_budget_s is not None and clock() - started > time_budget_s
        return past or bool(should_cancel and should_cancel())

    setup = BatchSetup(cfg, plan, memory_cap_bytes, memory_fraction, stop_passes, try_batch)
    runner, sampler = setup.open()
    one = setup.one

    def timed(batch: int, warmup: int, iters: int):
        """A batch's passes, the GPU read over its timed ones (a window of its own)."""
        if not isinstance(runner, ModelBatchRunner):
            return runner(batch, warmup=warmup, iters=iters)
        runner.window = slo_window(batch)
        try:
            return runner(batch, warmup=warmup, iters=iters)
        finally:
            runner.window = None

    host = HostProbe(during="the batch search")
    try:
        host.begin()
        with applied_flags(cfg.flags), grad_context(plan.step):
            with forward_errors(cfg.model, one.shape, plan.dtype, plan.device):
                outcome = search_slo(timed, slo, max_batch=max_batch, time_budget_s=time_budget_s,
                                     budget_started=started, clock=clock, release=setup.release, on_point=on_point,
                                     should_cancel=should_cancel)
        host.end()
    finally:
        del runner
        setup.close()
    setup.allocated_after()
    timed_points = [p for p in outcome.points if p.n]
    conditions = (sampler.summary([slo_window(p.batch) for p in timed_points],
                                  items=sum(p.n * p.batch for p in timed_points))
                  if sampler is not None and timed_points else None)
    if not outcome.cancelled and outcome.points and all(p.verdict == NO_FIT for p in outcome.points):
        raise OutOfMemory(f"{cfg.model}: even batch 1 does not fit on {plan.device}: {outcome.points[0].reason}")
    return SloResult(**cfg.input_facts(plan.inputs), model=cfg.model, device=str(plan.device),
                     sample_shape=plan.inputs.sample_shape, dtype=dtype_name(plan.dtype),
                     channels_last=cfg.channels_last, slo=slo, points=outcome.points, chosen=outcome.chosen,
                     stop_reason=outcome.stop_reason, cancelled=outcome.cancelled, duration_s=clock() - started,
                     time_budget_s=time_budget_s, max_batch_bound=max_batch, memory_cap_bytes=setup.cap,
                     notes=setup.notes, step=plan.step.describe(),
                     host_noise=host.summary([], spread="said per batch"), conditions=conditions)


def slo_window(batch: int) -> str:
    """The label of a batch's timed passes under a latency budget (engine/hardware/run_conditions.py)."""
    return f"slo{batch}"
