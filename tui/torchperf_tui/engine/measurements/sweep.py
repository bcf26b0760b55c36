"""Sequence length as the axis: a token model timed at lengths doubling from LO to HI at a fixed batch, under
the current flags (or two arms of an A/B, measured interleaved at each length), until a length does not fit or
the time budget ends.

Each length is one try of the batch search's runner (engine/measurements/batch_runner.py's ModelBatchRunner, at the
sweep's batch, with the inputs at that length): its latencies (median and p90), tokens/s (batch x length /
median latency) and its peak memory, measured as the batch search measures it (CUDA: the allocator's peak over
what was allocated before the try; CPU: the process's peak RSS growth). On the CPU nothing raises before the box
swaps, so the throughput search's memory cap stands in (half of the RAM available at the start unless given):
a length whose estimate (the last length's peak scaled by the square of the length ratio: attention's score
matrix grows so) or whose measured peak is over the cap does not fit. An out-of-memory ends an arm's curve, not
the sweep: in an A/B the other arm goes on (math's quadratic memory against flash's).

Each point carries the host over its timed blocks (engine/hardware/host_noise.py), and the result says a busy host
per point ("length 512 A: noisy host: ..."), or over the whole sweep where no point's window could tell.

Lengths past the model's maximum positions are cut with a note; a model whose main input is not token ids is
refused in one line. The result types and the pure functions load without torch (the app's UI process reads
them); `run_sweep` imports it.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable

from torchperf_tui.engine.measurements.flags import applied_flags, pristine_state
from torchperf_tui.engine.measurements.watched import watched
from torchperf_tui.core.errors import ShapeError, TorchperfError, first_line
from torchperf_tui.engine.hardware.host_noise import HostNoise, HostProbe, point_marks
from torchperf_tui.engine.workloads.inputs import dtype_name, parse_dtype, parse_seq_len
from torchperf_tui.engine.workloads.input_facts import InputFacts
from torchperf_tui.core.formatting import format_bytes
from torchperf_tui.core.stats import compute_stats
from torchperf_tui.engine.hardware.lazy_torch import torch
from torchperf_tui.engine.hardware.telemetry import release_memory
from torchperf_tui.engine.measurements.ab_arms import ArmSpec
from torchperf_tui.engine.measurements.batch_search import is_out_of_memory
from torchperf_tui.engine.measurements.train_step import grad_context
from torchperf_tui.engine.workloads.workload import build_for_run, forward_errors, place_model
from torchperf_tui.engine.workloads.quantization import quantize_model

DEFAULT_SEQ_LENS = "128-4096"
DEFAULT_ITERS = 10  # timed iterations per length and arm (split over the arms' interleaved blocks)
DEFAULT_WARMUP = 2  # per block
AB_ROUNDS = 2  # an A/B's blocks per arm and length, in the order A B B A (or B A A B at the next length)

OnPoint = Callable[["SweepPoint"], None]


def parse_seq_lens(text: str) -> tuple[int, int]:
    """'128-4096' -> (128, 4096); one number is a sweep of one length. One line for anything else."""
    raw = (text or "").strip()
    lo_text, sep, hi_text = raw.partition("-")
    if not lo_text.strip().isdigit() or (sep and not hi_text.strip().isdigit()):
        raise TorchperfError(f"--seq-lens {raw!r}: write LO-HI, two whole numbers, e.g. 128-4096")
    try:
        lo, hi = parse_seq_len(lo_text), parse_seq_len(hi_text if sep else lo_text)
    except ShapeError as exc:
        raise TorchperfError(f"--seq-lens {raw}: {exc}") from None
    if lo > hi:
        raise TorchperfError(f"--seq-lens {raw}: LO ({lo}) is above HI ({hi})")
    return lo, hi


def sweep_lengths(lo: int, hi: int) -> list[int]:
    """LO, 2 LO, 4 LO, ... up to HI, and HI itself last when the doubling does not land on it."""
    lengths = [lo]
    while lengths[-1] * 2 <= hi:
        lengths.append(lengths[-1] * 2)
    if lengths[-1] != hi:
        lengths.append(hi)
    return lengths


def cut_at_max(lengths: list[int], max_len: int | None, key: str = "") -> tuple[list[int], str | None]:
    """(the lengths within the model's maximum positions, the note naming those cut, or None)."""
    if max_len is None:
        return list(lengths), None
    kept = [n for n in lengths if n <= max_len]
    cut = [n for n in lengths if n > max_len]
    if not cut:
        return kept, None
    where = f" ({key})" if key else ""
    return kept, (f"length{'s' if len(cut) > 1 else ''} {', '.join(map(str, cut))} past the model's maximum of "
                  f"{max_len} positions{where}: not run")


@dataclass
class SweepPoint:
    """One length of one arm ('' in a sweep without arms): its figures, or why it did not fit."""

    length: int
    arm: str
    fits: bool
    median_ms: float | None = None
    p90_ms: float | None = None
    tokens_per_s: float | None = None
    peak_bytes: int | None = None  # CUDA: the allocator's peak over what was allocated before; CPU: RSS growth
    estimated_bytes: int | None = None  # CPU: the estimate checked against the cap before it ran
    iters: int = 0
    seconds: float | None = None  # the length's wall time for this arm: inputs, warm-up and iterations
    reason: str = ""  # why it did not fit
    host_noise: HostNoise | None = None  # the host over its timed blocks, as a timed run's

    @property
    def label(self) -> str:
        """'length 512', 'length 512 A': the point, as its marks name it."""
        return f"length {self.length}" + (f" {self.arm}" if self.arm else "")

    def disturbance_marks(self) -> list[str]:
        return self.host_noise.warnings() if self.host_noise is not None else []

    def to_dict(self) -> dict[str, Any]:
        from dataclasses import asdict

        data = asdict(self)
        data["host_noise"] = self.host_noise.to_dict() if self.host_noise is not None else None
        data["disturbance_marks"] = self.disturbance_marks()
        return data


@dataclass
class SweepResult(InputFacts):
    """A sweep: every point measured, the lengths planned, and what ended it."""

    model: str
    device: str
    dtype: str
    batch: int
    lengths: list[int]  # planned: doubling from LO to HI, within the model's maximum positions
    arms: list[tuple[str, str]]  # (name, what it ran: its flags, or its SPEC): one ('', flags) without an A/B
    points: list[SweepPoint]
    stop_reason: str
    memory_kind: str  # "cuda-allocator" or "rss"
    memory_cap_bytes: int | None  # the CPU cap (None on CUDA)
    time_budget_s: float | None
    duration_s: float
    cancelled: bool = False
    step: str = "infer"
    notes: list[str] = field(default_factory=list)
    state_notes: list[str] = field(default_factory=list)
    # The host over the whole sweep (each point has its own), and what the app saw beside it (a resize, heavy
    # redraws), set by the UI process when the result reaches it.
    host_noise: HostNoise | None = None
    app_marks: list[str] = field(default_factory=list)

    def disturbance_marks(self) -> list[str]:
        """Every reason the figures may not be the model's alone, one line each: what the app saw, then the host per
        point, or over the whole sweep where no point could tell."""
        return [*self.app_marks, *point_marks([(p.label, p.host_noise) for p in self.points], self.host_noise)]

    @property
    def ab(self) -> bool:
        return len(self.arms) == 2

    def curve(self, arm: str = "") -> list[SweepPoint]:
        """The lengths `arm` fitted at, in order: its curve."""
        return sorted((p for p in self.points if p.arm == arm and p.fits), key=lambda p: p.length)

    def point(self, length: int, arm: str = "") -> SweepPoint | None:
        return next((p for p in self.points if p.length == length and p.arm == arm), None)

    def to_dict(self) -> dict[str, Any]:
        from dataclasses import asdict

        data = asdict(self)
        data["arms"] = [{"name": name, "ran": text} for name, text in self.arms]
        data["points"] = [p.to_dict() for p in self.points]
        data["host_noise"] = self.host_noise.to_dict() if self.host_noise is not None else None
        data["disturbance_marks"] = self.disturbance_marks()
        return data


def length_estimate(last: SweepPoint | None, length: int) -> int | None:
    """A length's expected peak: the last fitted length's scaled by the square of the ratio (attention's scores
    are length x length; the rest grows linearly, so this errs on the safe side); None before any."""
    if last is None or not last.peak_bytes:
        return None
    return int(last.peak_bytes * (length / last.length) ** 2)


def time_estimate(history: dict[str, list[SweepPoint]], length: int) -> float:
    """What `length` will take, all arms together: each arm's last length's time scaled by the length ratio to the
    power its last two lengths grew by (between 1, linear, and 2, attention's quadratic; 1 with one length)."""
    total = 0.0
    for points in history.values():
        timed = [p for p in points if p.seconds]
        if not timed:
            continue
        last = timed[-1]
        power = 1.0
        if len(timed) >= 2 and timed[-2].length < last.length:
            import math

            before = timed[-2]
            power = math.log(last.seconds / before.seconds) / math.log(last.length / before.length)
            power = min(2.0, max(1.0, power))
        total += last.seconds * (length / last.length) ** power
    return total


def run_sweep(cfg, lo: int, hi: int, *, arms=None, iters: int = DEFAULT_ITERS, warmup: int = DEFAULT_WARMUP,
              time_budget_s: float | None = None, memory_cap_bytes: int | None = None,
              memory_fraction: float | None = None, on_point: OnPoint | None = None,
              should_cancel: Callable[[], bool] | None = None, clock: Callable[[], float] = time.monotonic
              ) -> SweepResult:
    """Sweep `cfg.model` (a BenchConfig: its model, batch, device, dtype, flags, step) over the lengths from `lo`
    to `hi` (see the module docstring). `arms`: None, or (A, B) ArmSpecs whose flags, dtype and step replace the
    base run's: both are measured at each length, in interleaved blocks. `time_budget_s` counts from the call
    (None: the throughput search's default; 0: none). `on_point(point)` is told each point as it is measured."""

    return watched(lambda watch: _Sweep(cfg, arms, iters, warmup, time_budget_s, memory_cap_bytes, memory_fraction, on_point,
                                                 should_cancel, clock, watch).run(lo, hi))


class _Sweep:
    """One sweep's state: the models per dtype, each arm's last fitted point, the budget."""

    def __init__(self, cfg, arms, iters, warmup, time_budget_s, memory_cap_bytes, memory_fraction, on_point,
                 should_cancel, clock, watch) -> None:
        # numpy: the app loads this module's results without it
        from torchperf_tui.engine.measurements.throughput import DEFAULT_MEMORY_FRACTION, DEFAULT_TIME_BUDGET_S

        if iters < 1 or (isinstance(warmup, int) and warmup < 0):
            raise TorchperfError(f"a sweep needs at least 1 iteration per length (got {iters}) and a warm-up >= 0")
        self.cfg, self.iters, self.warmup, self.clock, self.watch = cfg, iters, warmup, clock, watch
        self.budget = DEFAULT_TIME_BUDGET_S if time_budget_s is None else (time_budget_s or None)
        self.cap, self.fraction = memory_cap_bytes, memory_fraction or DEFAULT_MEMORY_FRACTION
        self.on_point = on_point or (lambda point: None)
        self.cancelled = should_cancel or (lambda: False)
        if arms is None:
            self.arms = {"": ArmSpec(flags=cfg.flags, text="")}
        else:
            if any(arm.shapes for arm in arms):
                raise TorchperfError("a sweep sets the input's length itself: leave shapes= out of the SPECs")
            if any(arm.quant for arm in arms):
                raise TorchperfError("a sweep's arms compare flags, dtype and step: quantize both arms with --quant, "
                                     "or compare quant= at one length with `compare`")
            self.arms = {"A": arms[0], "B": arms[1]}
        self.steps = {name: arm.step_spec(cfg) for name, arm in self.arms.items()}

    def run(self, lo: int, hi: int) -> SweepResult:
        started = self.clock()
        cfg = self.cfg
        plan = cfg.prepare(amp_for=[(self.steps[n], a.dtype or cfg.dtype) for n, a in self.arms.items()],
                           arms=self.arms.values())
        device, inputs = plan.device, plan.inputs
        if not inputs.tokens:
            raise TorchperfError(f"sweep varies a token model's sequence length, and {cfg.model} takes "
                                 f"{inputs.describe()}, not token ids: use bench --shapes for other inputs")
        lengths, cut = cut_at_max(sweep_lengths(lo, hi), inputs.max_len, inputs.max_len_key)
        if not lengths:
            raise ShapeError(f"--seq-lens {lo}-{hi}: every length is past {cfg.model}'s maximum of "
                             f"{inputs.max_len} positions ({inputs.max_len_key})")
        notes = [cut] if cut else []
        on_cuda = device.type == "cuda"
        self.device, self.inputs, self.kind = device, inputs, "cuda" if on_cuda else "cpu"
        if not on_cuda and self.cap is None:
            import psutil

            self.cap = int(psutil.virtual_memory().available * self.fraction)
            notes.append(f"CPU memory cap {_bytes(self.cap)} = {self.fraction:g} x RAM available at the start; a "
                         "length estimated or measured over it counts as not fitting")
        cap = None if on_cuda else self.cap
        self.models: dict[tuple, Any] = {}
        points: list[SweepPoint] = []
        last: dict[str, SweepPoint] = {}
        fitted: dict[str, list[SweepPoint]] = {name: [] for name in self.arms}
        stopped: dict[str, str] = {}
        stop_reason = "every length asked was measured"
        host = HostProbe(during="the sweep")  # the whole sweep, for where no point's own blocks can tell
        try:
            self._build(lengths[0])
            host.begin()
            for index, length in enumerate(lengths):
                live = [n for n in self.arms if n not in stopped]
                if not live:
                    break
                if self.cancelled():
                    stop_reason = "cancelled"
                    break
                elapsed = self.clock() - started
                needed = time_estimate({n: fitted[n] for n in live}, length)
                if self.budget is not None and index and elapsed + needed > self.budget:
                    stop_reason = (f"time budget: length {length} would end past the {self.budget:g} s budget "
                                   f"({elapsed:.0f} s spent, about {needed:.0f} s more needed)")
                    break
                measured = self._length(length, live, last, cap, release_memory, index)
                if measured is None:
                    stop_reason = "cancelled"
                    break
                for point in measured:
                    points.append(point)
                    self.on_point(point)
                    if point.fits:
                        last[point.arm] = point
                        fitted[point.arm].append(point)
                    else:
                        stopped[point.arm] = f"length {length} does not fit: {point.reason}"
            host.end()
            if stopped and stop_reason == "every length asked was measured":
                stop_reason = "; ".join((f"arm {n}: " if n else "") + why for n, why in stopped.items())
            elif stopped:
                notes += [(f"arm {n}: " if n else "") + why for n, why in stopped.items()]
        finally:
            self.models.clear()
            release_memory(self.kind)
        default = pristine_state().flags.num_threads  # a count left to the process: 'threads=2 (default)'
        texts = [(n, a.text or a.flags.describe(device.type, default_threads=default))
                 for n, a in self.arms.items()]
        return SweepResult(
            **cfg.input_facts(inputs) | {"seq_len": None, "inputs": ""},  # the title says the lengths
            model=cfg.model, device=str(device), dtype=dtype_name(plan.dtype), batch=inputs.batch,
            lengths=lengths, arms=texts, points=points, stop_reason=stop_reason,
            memory_kind="cuda-allocator" if on_cuda else "rss", memory_cap_bytes=cap,
            time_budget_s=self.budget, duration_s=self.clock() - started, cancelled=stop_reason == "cancelled",
            step=self.steps[next(iter(self.arms))].describe() if len(set(map(str, self.steps.values()))) == 1
            else "mixed", notes=notes, host_noise=host.summary([], spread="said per length"))

    def _dtype(self, name: str) -> str:
        return self.arms[name].dtype or self.cfg.dtype

    def _model_key(self, name: str) -> tuple:
        """The arm's model, which arms alike share (BenchConfig.model_key: (dtype, channels_last, quant, attn))."""
        return self.arms[name].run_of(self.cfg).model_key()

    def _build(self, first: int) -> None:
        """The model once per dtype and attention implementation the arms run in, on the device (a failure to load is one line), and one pass
        of each at the first length, untimed: the one-off allocations of a first pass (library workspaces, the
        allocator's arenas, a model's caches) land before any length's memory is read, not in the first's."""
        for name, arm in self.arms.items():
            key = self._model_key(name)
            if key in self.models:
                continue
            dtype = parse_dtype(key[0])
            with forward_errors(self.cfg.model, self.inputs.shape, dtype, self.device, action="loading"):
                model = build_for_run(self.cfg.model, self.device, dtype, self.cfg.model_args, key[3])
                self.models[key] = place_model(model, self.device, dtype, False, self.inputs.rank)
                if key[2] is not None:  # the key's scheme (the run's: an arm cannot set one)
                    quantize_model(self.models[key], key[2])
            self.watch.built()
            shape = (self.inputs.batch, first)
            with applied_flags(arm.flags), torch.no_grad(), forward_errors(self.cfg.model, shape, dtype, self.device):
                self.inputs.with_shape(shape).make(self.device, dtype, seed=self.cfg.seed).call(self.models[key])

    def _length(self, length: int, live: list[str], last: dict, cap, release, index: int) -> list[SweepPoint] | None:
        """Every live arm at `length`: alone, or in blocks A B B A (B A A B at every other length); None when
        cancelled before a block ran."""
        if len(live) == 1:
            order = live
        else:
            pair = live if index % 2 == 0 else live[::-1]
            order = (pair + pair[::-1]) * (AB_ROUNDS // 2)
        per_block = max(1, self.iters // order.count(order[0]))
        samples: dict[str, list[float]] = {n: [] for n in live}
        peaks: dict[str, int | None] = {}
        estimated: dict[str, int | None] = {}
        seconds: dict[str, float] = {n: 0.0 for n in live}
        failed: dict[str, str] = {}
        hosts = {n: HostProbe(during="its timed blocks") for n in live}  # read over each of the arm's blocks
        for name in order:
            if name in failed:
                continue
            if self.cancelled():
                return None
            release(self.kind)  # before the runner reads the memory it starts from: a fresh footing for each block
            t0 = self.clock()
            outcome, why = self._block(name, length, per_block, estimate=length_estimate(last.get(name), length),
                                       cap=cap, host=hosts[name])
            seconds[name] += self.clock() - t0
            if outcome is None and not why:
                return None  # cancelled in the block
            if outcome is None:
                failed[name] = why
                continue
            samples[name] += outcome.samples_ms
            peaks[name] = max(peaks.get(name) or 0, outcome.peak_bytes or 0)
            estimated[name] = outcome.estimated_bytes
        points = []
        for name in live:
            if name in failed:
                points.append(SweepPoint(length, name, False, reason=failed[name], seconds=seconds[name]))
                continue
            point = _fitted_point(length, name, self.inputs.batch, samples[name], peaks.get(name),
                                  estimated.get(name), seconds[name])
            point.host_noise = hosts[name].summary(samples[name])
            points.append(point)
        return points

    def _block(self, name: str, length: int, iters: int, estimate: int | None, cap, host: HostProbe):
        """(TryOutcome, '') from one block of arm `name` at `length`; (None, why) when it does not fit; (None, '')
        when it was cancelled before a timed iteration. `host` is read over its timed iterations."""
        # numpy: the app loads this module's results without it
        from torchperf_tui.engine.measurements.batch_runner import ModelBatchRunner
        arm, step, batch = self.arms[name], self.steps[name], self.inputs.batch
        dtype = parse_dtype(self._dtype(name))
        runner = ModelBatchRunner(self.models[self._model_key(name)], self.inputs.with_shape((batch, length)),
                                  device=self.device, dtype=dtype, memory_cap_bytes=cap,
                                  activation_bytes_per_sample=-(-estimate // batch) if estimate else None,
                                  should_cancel=self.cancelled, step=step, seed=self.cfg.seed)
        runner.host = host
        try:
            with applied_flags(arm.flags), grad_context(step), \
                    forward_errors(self.cfg.model, (batch, length), dtype, self.device):
                try:
                    outcome = runner(batch, warmup=self.warmup, iters=iters)
                    self.watch.ran(arm.flags, during=f"arm {name}'s blocks" if name else "the sweep")
                except Exception as exc:  # noqa: BLE001 - only running out of memory is a point; the rest raises
                    if not is_out_of_memory(exc):
                        raise
                    return None, first_line(exc) or "out of memory"
        finally:
            del runner
        if not outcome.samples_ms or self.cancelled():
            return None, ""
        return outcome, ""


def _fitted_point(length: int, arm: str, batch: int, samples: list[float], peak: int | None,
                  estimated: int | None, seconds: float) -> SweepPoint:
    stats = compute_stats(samples, batch=batch)
    tokens = batch * length * 1000.0 / stats.p50_ms if stats.p50_ms > 0 else None
    return SweepPoint(length, arm, True, median_ms=stats.p50_ms, p90_ms=stats.p90_ms, tokens_per_s=tokens,
                      peak_bytes=peak, estimated_bytes=estimated, iters=stats.n, seconds=seconds)


def _bytes(n: int) -> str:
    return format_bytes(n)
