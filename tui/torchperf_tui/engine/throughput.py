"""Throughput: the largest batch that fits, found by geometric growth then bisection, and samples/s there.

The search grows the batch 1, 2, 4, ... until a try runs out of memory (or the max-batch bound is
reached), then bisects between the last batch that fitted and the first that failed. A try that runs out
of memory is not an error: its exception is reduced to one line and dropped (its traceback holds the
frames that hold the half-built activations), memory is released, and the search goes on.

On the CPU nothing raises before the box swaps, so a memory cap (default: half of the RAM available when
the search starts) stands in for the device's capacity: a try's need is estimated before it runs, from
the peak RSS growth of the largest batch that fitted so far scaled by batch (or, before anything has run,
from the activation bytes of the complexity analysis), and a try whose estimate is over the cap counts as
out of memory without being run.

`search_max_batch` is the pure search over a `try_batch(batch, warmup, iters)` callable (the seam tests
drive with the real `torch.OutOfMemoryError`); `find_max_batch` builds the model and runs it.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable

import psutil
import torch

from torchperf_tui.engine.errors import OutOfMemory, TorchperfError, first_line
from torchperf_tui.engine.flags import applied_flags
from torchperf_tui.engine.inputs import dtype_name, make_input, parse_dtype, resolve_device
from torchperf_tui.engine.nvml import NA, to_jsonable
from torchperf_tui.engine.telemetry import release_memory
from torchperf_tui.engine.timing import BenchConfig, run_timed_loop
from torchperf_tui.engine.workload import forward_errors, place_model
from torchperf_tui.formatting import format_bytes

DEFAULT_MAX_BATCH = 1024
DEFAULT_MEMORY_FRACTION = 0.5  # of the RAM available when a CPU search starts
# A try only has to tell "fits" from "does not" and give a rough latency for the plot: keep it short.
TRY_WARMUP = 1
TRY_ITERS = 3
MEASURE_WARMUP = 3
MEASURE_ITERS = 10

OnProgress = Callable[["BatchTry"], None]
ShouldCancel = Callable[[], bool]


class MemoryCapExceeded(Exception):
    """A CPU try whose estimated need is over the memory cap: treated exactly like an out-of-memory."""


@dataclass
class TryOutcome:
    """What one try measured: per-batch latencies (ms) and the peak memory it added (bytes, if known)."""

    samples_ms: list[float]
    peak_bytes: int | None = None
    estimated_bytes: int | None = None


@dataclass
class BatchTry:
    """One batch size tried. `phase`: "grow" (1, 2, 4, ...), "bisect", or "measure" (the final run)."""

    batch: int
    fits: bool
    phase: str
    latency_ms: float | None = None  # median per-batch latency of the try's iterations
    samples_per_s: float | None = None  # iterations x batch / total time of those iterations
    reason: str = ""  # why it did not fit (one line); "" when it did
    peak_bytes: int | None = None  # memory the try added at its peak (CUDA allocator / CPU RSS)
    estimated_bytes: int | None = None  # the CPU estimate checked against the cap before running
    iters: int = 0

    def to_dict(self) -> dict[str, Any]:
        return to_jsonable(self)


@dataclass
class SearchOutcome:
    max_batch: int  # 0 when even batch 1 did not fit
    tries: list[BatchTry]
    cancelled: bool
    hit_bound: bool  # growth stopped at the max-batch bound, not at a failure: the real limit may be higher


@dataclass
class ThroughputResult:
    model: str
    device: str
    sample_shape: tuple[int, ...]  # one input item, without the batch dimension
    dtype: str
    channels_last: bool
    max_batch: int  # largest batch that fitted (0: none did)
    max_batch_bound: int
    hit_bound: bool
    tries: list[BatchTry]
    measurement: BatchTry | None  # the longer run at max_batch
    samples_per_s: float | None  # from `measurement`: iterations x batch / total time
    latency_ms: float | None  # median per-batch latency at max_batch
    memory_cap_bytes: int | NA  # the CPU cap; NA on CUDA (the device's own memory is the limit)
    allocator_before_bytes: int | NA  # torch.cuda.memory_allocated before the search
    allocator_after_bytes: int | NA  # ... and after it, once everything was released
    cancelled: bool
    duration_s: float
    notes: list[str] = field(default_factory=list)

    @property
    def points(self) -> list[BatchTry]:
        """The tries that fitted, by batch size: throughput and latency against batch, for a plot."""
        best: dict[int, BatchTry] = {}
        for t in self.tries:
            if t.fits:
                best[t.batch] = t
        return [best[b] for b in sorted(best)]

    def to_dict(self) -> dict[str, Any]:
        data = to_jsonable(self)
        data["points"] = [p.to_dict() for p in self.points]
        return data


# --------------------------------------------------------------------------------------------------------
# Out-of-memory recognition


_OOM_TEXT = ("out of memory", "alloc_failed", "can't allocate memory", "cannot allocate memory")


def is_out_of_memory(exc: BaseException) -> bool:
    """torch.OutOfMemoryError, the CPU cap, and the allocation failures that surface as RuntimeError
    (cuBLAS/cuDNN workspace allocation, the CPU allocator's "can't allocate memory")."""
    if isinstance(exc, (torch.OutOfMemoryError, MemoryCapExceeded, MemoryError)):
        return True
    return isinstance(exc, RuntimeError) and any(t in str(exc).lower() for t in _OOM_TEXT)


def _rate(samples_ms: list[float], batch: int) -> tuple[float | None, float | None]:
    """(median latency ms, samples/s = iterations x batch / total time)."""
    if not samples_ms:
        return None, None
    ordered = sorted(samples_ms)
    mid = len(ordered) // 2
    median = ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2
    total_s = sum(samples_ms) / 1000.0
    return median, (len(samples_ms) * batch / total_s if total_s > 0 else None)


# --------------------------------------------------------------------------------------------------------
# The search


TryBatch = Callable[..., "TryOutcome | float | list[float]"]


def _outcome(value: TryOutcome | float | list[float]) -> TryOutcome:
    if isinstance(value, TryOutcome):
        return value
    if isinstance(value, (int, float)):
        return TryOutcome([float(value)])
    return TryOutcome([float(v) for v in value])


def search_max_batch(try_batch: TryBatch, *, max_batch: int = DEFAULT_MAX_BATCH, start: int = 1,
                     resolution: int = 1, warmup: int = TRY_WARMUP, iters: int = TRY_ITERS,
                     release: Callable[[], object] | None = None, on_progress: OnProgress | None = None,
                     should_cancel: ShouldCancel | None = None) -> SearchOutcome:
    """Find the largest batch in [start, max_batch] for which `try_batch(batch, warmup=, iters=)` does not
    run out of memory. `try_batch` returns per-batch latencies in ms (a float, a list, or a TryOutcome)
    and raises torch.OutOfMemoryError (or MemoryCapExceeded) when the batch does not fit; any other error
    propagates. `release()` runs after every try that failed and once at the end, so the caller gets the
    allocator back at its baseline (not after fitting tries: their tensors are freed by reference counting,
    and a full gc costs tenths of a second with torch loaded). Bisection stops when the gap between the
    last fit and the first failure is at most `resolution`.
    """
    if max_batch < 1 or start < 1 or start > max_batch:
        raise TorchperfError(f"batch bounds must satisfy 1 <= start <= max batch, got {start} and {max_batch}")
    if resolution < 1:
        raise TorchperfError(f"resolution must be at least 1, got {resolution}")
    release = release or (lambda: None)
    emit = on_progress or (lambda t: None)
    cancelled = should_cancel or (lambda: False)
    tries: list[BatchTry] = []

    def attempt(batch: int, phase: str) -> bool | None:
        """True: fits; False: out of memory; None: cancelled before one iteration ran."""
        reason = ""
        estimated = None
        outcome: TryOutcome | None = None
        try:
            outcome = _outcome(try_batch(batch, warmup=warmup, iters=iters))
        except Exception as exc:  # noqa: BLE001 - only out-of-memory is swallowed, anything else re-raised
            if not is_out_of_memory(exc):
                raise
            reason = first_line(exc)
            estimated = getattr(exc, "estimated_bytes", None)
            # `exc` (and its traceback, which pins the failed try's tensors) dies with this block.
        if outcome is None:
            release()
        if outcome is not None and not outcome.samples_ms:
            return None  # the try was cancelled before it ran: it says nothing about fitting
        if outcome is None:
            t = BatchTry(batch, False, phase, reason=reason or "out of memory", estimated_bytes=estimated)
        else:
            latency, rate = _rate(outcome.samples_ms, batch)
            t = BatchTry(batch, True, phase, latency, rate, peak_bytes=outcome.peak_bytes,
                         estimated_bytes=outcome.estimated_bytes, iters=len(outcome.samples_ms))
        tries.append(t)
        emit(t)
        return t.fits

    try:
        return _grow_then_bisect(attempt, start, max_batch, resolution, tries, cancelled)
    finally:
        release()


def _grow_then_bisect(attempt: Callable[[int, str], bool | None], start: int, max_batch: int,
                      resolution: int, tries: list[BatchTry], cancelled: ShouldCancel) -> SearchOutcome:
    last_fit, first_fail = 0, None
    batch = start
    while True:
        if cancelled():
            return SearchOutcome(last_fit, tries, True, False)
        fits = attempt(batch, "grow")
        if fits is None:
            return SearchOutcome(last_fit, tries, True, False)
        if fits:
            last_fit = batch
            if batch >= max_batch:
                return SearchOutcome(last_fit, tries, False, True)
            batch = min(batch * 2, max_batch)
        else:
            first_fail = batch
            break
    if last_fit == 0 and start == 1:
        return SearchOutcome(0, tries, False, False)
    low = last_fit if last_fit else 0
    high = first_fail
    while high - low > resolution:
        if cancelled():
            return SearchOutcome(last_fit, tries, True, False)
        mid = (low + high) // 2
        fits = attempt(mid, "bisect")
        if fits is None:
            return SearchOutcome(last_fit, tries, True, False)
        if fits:
            low = last_fit = mid
        else:
            high = mid
    return SearchOutcome(last_fit, tries, False, False)


# --------------------------------------------------------------------------------------------------------
# Running a real model


class _PeakRss:
    """Peak resident memory over a span: Linux lets a process reset its high-water mark (VmHWM) by
    writing 5 to /proc/self/clear_refs; elsewhere the RSS after the span stands in (an underestimate)."""

    def __init__(self) -> None:
        self._process = psutil.Process()
        self.exact = True

    def reset(self) -> int:
        """Start a span; returns the RSS now."""
        try:
            with open("/proc/self/clear_refs", "w") as fh:
                fh.write("5")
        except OSError:
            self.exact = False
        return int(self._process.memory_info().rss)

    def peak(self) -> int:
        if self.exact:
            try:
                with open("/proc/self/status") as fh:
                    for line in fh:
                        if line.startswith("VmHWM:"):
                            return int(line.split()[1]) * 1024
            except OSError:
                pass
            self.exact = False
        return int(self._process.memory_info().rss)


class ModelBatchRunner:
    """Runs one built model at a given batch: the default `try_batch` of `find_max_batch`.

    On the CPU it keeps the estimate of a try's need (see the module docstring) and refuses, with
    MemoryCapExceeded, a try whose estimate is over `memory_cap_bytes`.
    """

    def __init__(self, model: torch.nn.Module, sample_shape: tuple[int, ...], *, device: torch.device,
                 dtype: torch.dtype, channels_last: bool = False, memory_cap_bytes: int | None = None,
                 activation_bytes_per_sample: int | None = None,
                 should_cancel: ShouldCancel | None = None) -> None:
        self.model = model
        self.sample_shape = tuple(sample_shape)
        self.device = device
        self.dtype = dtype
        self.channels_last = channels_last
        self.memory_cap_bytes = memory_cap_bytes
        self.activation_bytes_per_sample = activation_bytes_per_sample
        self.should_cancel = should_cancel
        self._fits: dict[int, int] = {}  # batch -> peak growth (bytes) of the tries that fitted
        self._rss = _PeakRss()
        # Growth is measured from the RSS when the runner was made (just after a release), not from the
        # RSS before each try: freed pages glibc keeps from an earlier try would be reused unseen.
        self._baseline_rss = int(psutil.Process().memory_info().rss)

    def estimate_bytes(self, batch: int) -> int | None:
        """A try's expected peak memory growth.

        From the two largest tries that fitted: a straight line (fixed overhead + bytes per sample) through
        their measured peaks, never below the larger peak; from one: its peak scaled by batch (its fixed
        overhead scales too, which errs on the safe side); before any: activation bytes x batch.
        """
        fits: list[tuple[int, int]] = []
        for b, grown in sorted(self._fits.items()):
            # Peaks are noisy (glibc reuses freed pages unseen): a larger batch never needs less.
            envelope = max(grown, fits[-1][1] if fits else 0)
            if envelope > 0:
                fits.append((b, envelope))
        if len(fits) >= 2:
            (b1, p1), (b2, p2) = fits[-2], fits[-1]
            per_sample = (p2 - p1) / (b2 - b1)
            if per_sample > 0:
                return int(max(p2 + per_sample * (batch - b2), p2 if batch >= b2 else 0))
        if fits:
            b2, p2 = fits[-1]
            return int(p2 * batch / b2)
        if self.activation_bytes_per_sample:
            return int(self.activation_bytes_per_sample * batch)
        return None

    def __call__(self, batch: int, warmup: int = TRY_WARMUP, iters: int = TRY_ITERS) -> TryOutcome:
        on_cpu = self.device.type == "cpu"
        estimated = self.estimate_bytes(batch) if on_cpu else None
        if on_cpu and self.memory_cap_bytes is not None and estimated is not None \
                and estimated > self.memory_cap_bytes:
            exc = MemoryCapExceeded(f"over the CPU memory cap: needs about {format_bytes(estimated)}, "
                                    f"cap {format_bytes(self.memory_cap_bytes)}")
            exc.estimated_bytes = estimated  # type: ignore[attr-defined]
            raise exc
        shape = (batch, *self.sample_shape)
        if on_cpu:
            # Memory freed since the baseline was taken would hide part of this try's growth.
            self._baseline_rss = min(self._baseline_rss, self._rss.reset())
        else:
            torch.cuda.synchronize(self.device)
            torch.cuda.reset_peak_memory_stats(self.device)
            allocated_before = torch.cuda.memory_allocated(self.device)
        x = make_input(shape, dtype=self.dtype, device=self.device, channels_last=self.channels_last)
        model = self.model
        times = run_timed_loop(lambda: model(x), device=self.device, warmup=warmup, iters=iters,
                               should_cancel=self.should_cancel)
        x = None  # the input goes before the peak is read and before the next, larger try
        if on_cpu:
            peak = max(0, self._rss.peak() - self._baseline_rss)
            self._fits[batch] = peak
        else:
            peak = max(0, torch.cuda.max_memory_allocated(self.device) - allocated_before)
        samples = times.samples_ms or ([times.first_iter_ms] if times.first_iter_ms is not None else [])
        return TryOutcome(samples, peak_bytes=peak, estimated_bytes=estimated)


def _activation_bytes_per_sample(cfg: BenchConfig, shape: tuple[int, ...]) -> int | None:
    """Sum of every layer's output bytes for one sample: an upper bound on live activations under
    inference mode (outputs are freed as soon as the next layer has read them). None if analysis fails."""
    from torchperf_tui.engine.complexity import analyse_complexity

    try:
        c = analyse_complexity(cfg.model, (1, *shape[1:]), dtype=cfg.dtype, layers=True)
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


def find_max_batch(cfg: BenchConfig, *, max_batch: int = DEFAULT_MAX_BATCH, resolution: int = 1,
                   try_warmup: int = TRY_WARMUP, try_iters: int = TRY_ITERS,
                   measure_warmup: int = MEASURE_WARMUP, measure_iters: int = MEASURE_ITERS,
                   memory_cap_bytes: int | None = None, memory_fraction: float = DEFAULT_MEMORY_FRACTION,
                   on_progress: OnProgress | None = None, should_cancel: ShouldCancel | None = None,
                   try_batch: TryBatch | None = None) -> ThroughputResult:
    """Largest batch of `cfg.model` that fits on `cfg.device`, then samples/s at that batch.

    `cfg.input_shape`/`cfg.batch` only give the per-sample shape (the batch dimension is searched).
    `memory_cap_bytes` (CPU only) defaults to `memory_fraction` of the RAM available now. `try_batch`
    replaces the model runner (a seam for tests); by default the model is built here and dropped at the end.
    """
    started = time.time()
    device = resolve_device(cfg.device)
    dtype = parse_dtype(cfg.dtype)
    sample_shape = tuple(cfg.resolved_shape()[1:])
    on_cuda = device.type == "cuda"
    notes: list[str] = []
    cap: int | NA
    if on_cuda:
        cap = NA("on CUDA the device's own memory is the limit")
        torch.cuda.synchronize(device)
        _drop_cublas_workspaces()  # the same footing as the end, where they are dropped too
        allocated_before: int | NA = int(torch.cuda.memory_allocated(device))
    else:
        if memory_cap_bytes is None:
            memory_cap_bytes = int(psutil.virtual_memory().available * memory_fraction)
            notes.append(f"CPU memory cap {format_bytes(memory_cap_bytes)} = {memory_fraction:g} x RAM available "
                         "at the start; a try estimated over it counts as out of memory")
        cap = memory_cap_bytes
        allocated_before = NA("no CUDA allocator on the CPU")

    def release() -> None:
        release_memory("cuda" if on_cuda else "cpu")

    model = None
    runner: TryBatch
    if try_batch is not None:
        runner = try_batch
    else:
        from torchperf_tui.engine.models import build_model

        try:
            model = place_model(build_model(cfg.model, device="cpu"), device, dtype, cfg.channels_last,
                                1 + len(sample_shape))
        except torch.OutOfMemoryError as exc:
            release()
            raise OutOfMemory(f"{cfg.model}'s weights alone do not fit on {device}: {first_line(exc)}") from None
        per_sample = None if on_cuda else _activation_bytes_per_sample(cfg, (1, *sample_shape))
        if not on_cuda:
            release()  # trim first: the runner's RSS baseline must not hold reusable free pages
        runner = ModelBatchRunner(model, sample_shape, device=device, dtype=dtype,
                                  channels_last=cfg.channels_last,
                                  memory_cap_bytes=None if on_cuda else memory_cap_bytes,
                                  activation_bytes_per_sample=per_sample, should_cancel=should_cancel)
    measurement: BatchTry | None = None
    try:
        with applied_flags(cfg.flags), torch.inference_mode():
            with forward_errors(cfg.model, (1, *sample_shape), dtype, device):
                outcome = search_max_batch(runner, max_batch=max_batch, resolution=resolution,
                                           warmup=try_warmup, iters=try_iters, release=release,
                                           on_progress=on_progress, should_cancel=should_cancel)
            if outcome.max_batch and not outcome.cancelled and not (should_cancel and should_cancel()):
                measurement = _measure(runner, outcome.max_batch, measure_warmup, measure_iters)
                if on_progress is not None:
                    on_progress(measurement)
    finally:
        del runner, model
        release()
        if on_cuda and _drop_cublas_workspaces():
            release()
    if outcome.hit_bound:
        notes.append(f"stopped at the max-batch bound {max_batch}: larger batches may fit too")
    if outcome.max_batch == 0 and outcome.tries:
        notes.append(f"even batch 1 does not fit: {outcome.tries[0].reason}")
    allocated_after: int | NA = allocated_before
    if on_cuda:
        torch.cuda.synchronize(device)
        allocated_after = int(torch.cuda.memory_allocated(device))
        if allocated_after != allocated_before:
            notes.append(f"the CUDA allocator holds {format_bytes(allocated_after - allocated_before)} more than "
                         "before the search (library workspaces created by the first run stay allocated)")
    fitted = measurement if measurement is not None and measurement.fits else None
    return ThroughputResult(
        model=cfg.model, device=str(device), sample_shape=sample_shape, dtype=dtype_name(dtype),
        channels_last=cfg.channels_last, max_batch=outcome.max_batch, max_batch_bound=max_batch,
        hit_bound=outcome.hit_bound, tries=outcome.tries, measurement=measurement,
        samples_per_s=fitted.samples_per_s if fitted else None,
        latency_ms=fitted.latency_ms if fitted else None,
        memory_cap_bytes=cap, allocator_before_bytes=allocated_before, allocator_after_bytes=allocated_after,
        cancelled=outcome.cancelled or bool(should_cancel and should_cancel()),
        duration_s=time.time() - started, notes=notes,
    )


def _measure(runner: TryBatch, batch: int, warmup: int, iters: int) -> BatchTry:
    """The longer run at the batch found. Memory noise can still make it fail: then it says so."""
    try:
        outcome = _outcome(runner(batch, warmup=warmup, iters=iters))
    except Exception as exc:  # noqa: BLE001
        if not is_out_of_memory(exc):
            raise
        reason = first_line(exc)
        outcome = None
    if outcome is None:
        return BatchTry(batch, False, "measure", reason=reason)
    latency, rate = _rate(outcome.samples_ms, batch)
    return BatchTry(batch, True, "measure", latency, rate, peak_bytes=outcome.peak_bytes,
                    estimated_bytes=outcome.estimated_bytes, iters=len(outcome.samples_ms))
