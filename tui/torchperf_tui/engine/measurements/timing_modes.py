"""Timing modes side by side: one model measured three ways in one run, each mode's samples kept apart.

- sync: every iteration synchronised (the engine's default), the latency of one request.
- pipelined: back-to-back iterations with one synchronisation per block of `per_block`, the steady-state
  time per iteration, which is what torch.utils.benchmark's blocked_autorange measures. A sample is one
  block's time divided by its iterations.
- graph (CUDA, inference): the eager model captured into a CUDA graph once, then each replay synchronised
  like a sync iteration. This removes the launch overhead, so sync - graph is what Python and the launches cost.
- cold L2 (CUDA): before each sync and graph iteration, a buffer twice the L2 size is written. The write is
  outside the timed region (ahead of the start event on the same stream). Pipelined iterations run back to
  back, so each one meets an L2 that the previous one left warm.

After one shared warm-up, the modes run in interleaved rounds, and their order rotates each round. Drift
and neighbours then hit every mode alike. The gaps between the modes' medians are said in words
(`ModesResult.findings`). Each mode carries the host over its share of each round and the spread of its samples
(engine/hardware/host_noise.py), and the result says a busy host or a noisy spread per mode, as a run does.
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass, field
from typing import Callable

from torchperf_tui.engine.measurements.bench_config import BenchConfig
from torchperf_tui.engine.workloads.input_facts import InputFacts
from torchperf_tui.core.errors import TorchperfError, first_line
from torchperf_tui.engine.measurements.flags import Flags, applied_flags
from torchperf_tui.engine.workloads.inputs import dtype_name
from torchperf_tui.engine.hardware.lazy_torch import torch
from torchperf_tui.engine.hardware.condition_sampler import conditions_sampler
from torchperf_tui.engine.hardware.host_noise import HostNoise, HostProbe, point_marks
from torchperf_tui.engine.hardware.run_conditions import RunConditions, per_item_word, throttle_note
from torchperf_tui.core.stats import TimingStats, compute_stats
from torchperf_tui.engine.measurements.timing import run_timed_loop
from torchperf_tui.core.formatting import format_bytes, format_energy, format_ms, warmup_budget_text
from torchperf_tui.engine.measurements.train_step import StepRunner, grad_context
from torchperf_tui.engine.workloads.shapes import parse_schedule
from torchperf_tui.engine.workloads.workload import forward_errors, prepare_workload

MODES = ("sync", "pipelined", "graph")
MEANING = {
    "sync": "every iteration synchronised: the latency of one request",
    "pipelined": "back to back, one synchronisation per block: the steady-state time per iteration",
    "graph": "captured once into a CUDA graph, each replay synchronised: no launch overhead",
}
DEFAULT_PER_BLOCK = 10
DEFAULT_ROUNDS = 3
FALLBACK_FLUSH_BYTES = 256 * 1024 * 1024  # when torch does not report the L2 size
MIN_BLOCKS_PER_ROUND = 3  # a pipelined sample is a block: a median wants a few of them
GAP_SHARE = 0.03  # a gap under 3 % of the sync median is within what rounds of the same mode differ by
LAUNCH_BOUND_SHARE = 0.25  # launch overhead above this share of the sync median: the launches set the pace

OnProgress = Callable[[str, int, int], None]  # (mode, samples done in this mode, samples it will take)


@dataclass
class ModeResult:
    mode: str
    samples_ms: list[float] = field(default_factory=list)
    stats: TimingStats | None = None
    unavailable: str | None = None  # why this mode did not run; the other modes stand
    conditions: RunConditions | None = None  # CUDA: the GPU's clocks, throttling and energy over this mode's samples
    host_noise: HostNoise | None = None  # the host over this mode's shares of the rounds, and its samples' spread

    def disturbance_marks(self) -> list[str]:
        return self.host_noise.warnings() if self.host_noise is not None else []

    def to_dict(self) -> dict:
        return {"mode": self.mode, "meaning": MEANING[self.mode], "samples_ms": self.samples_ms,
                "stats": asdict(self.stats) if self.stats else None, "unavailable": self.unavailable,
                "conditions": self.conditions.to_dict() if self.conditions is not None else None,
                "host_noise": self.host_noise.to_dict() if self.host_noise is not None else None,
                "disturbance_marks": self.disturbance_marks()}


@dataclass
class ModesResult(InputFacts):
    model: str
    device: str
    input_shape: tuple[int, ...]
    dtype: str
    step: str  # "infer" or "train (sgd)", with " · amp bf16"
    flags: Flags
    modes: list[ModeResult]
    per_block: int
    rounds: int
    cold_l2: bool = False
    flush_bytes: int | None = None  # the buffer written before each cold iteration
    first_iter_ms: float | None = None
    cancelled: bool = False
    duration_s: float = 0.0
    findings: list[str] = field(default_factory=list)
    # The host over every mode's rounds (each mode has its own: ModeResult.host_noise), and what the app saw beside
    # them (a resize, heavy redraws), set by the UI process when the result reaches it.
    host_noise: HostNoise | None = None
    app_marks: list[str] = field(default_factory=list)

    def disturbance_marks(self) -> list[str]:
        """Every reason the medians may not be the model's alone, one line each: what the app saw, then each mode's
        host and spread ('sync: noisy host: ...'), or the rounds' host where no mode could tell."""
        return [*self.app_marks, *point_marks([(m.mode, m.host_noise) for m in self.modes], self.host_noise)]

    def mode(self, name: str) -> ModeResult | None:
        return next((m for m in self.modes if m.mode == name), None)

    def median(self, name: str) -> float | None:
        found = self.mode(name)
        return found.stats.p50_ms if found is not None and found.stats is not None else None

    def to_dict(self) -> dict:
        data = asdict(self)
        data["input_shape"] = list(self.input_shape)
        data["flags"] = self.flags.to_dict()
        data["modes"] = [m.to_dict() for m in self.modes]
        data["host_noise"] = self.host_noise.to_dict() if self.host_noise is not None else None
        data["disturbance_marks"] = self.disturbance_marks()
        return data


def parse_modes(text: str) -> tuple[str, ...]:
    """'sync,pipelined,graph' -> the modes in the canonical order, each once; unknown names are a user error."""
    names = [part.strip().lower() for part in text.split(",") if part.strip()]
    unknown = [name for name in names if name not in MODES]
    if unknown or not names:
        what = f"unknown timing mode {unknown[0]!r} in {text!r}" if unknown else "no timing mode given"
        raise TorchperfError(f"{what}: choose from {', '.join(MODES)}")
    return tuple(mode for mode in MODES if mode in names)


def _events_ms(fn: Callable[[], object], count: int) -> float:
    """CUDA: `count` calls back to back between two events, one synchronisation: ms per call."""
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(count):
        fn()
    end.record()
    end.synchronize()
    return float(start.elapsed_time(end)) / count


def _clock_ms(fn: Callable[[], object], count: int) -> float:
    t0 = time.perf_counter_ns()
    for _ in range(count):
        fn()
    return (time.perf_counter_ns() - t0) / 1e6 / count


def _capture(fn: Callable[[], object], device: torch.device) -> tuple[Callable[[], object] | None, str | None]:
    """(replay, None), or (None, why the model could not be captured into a CUDA graph)."""
    side = torch.cuda.Stream(device)
    side.wait_stream(torch.cuda.current_stream(device))
    graph = torch.cuda.CUDAGraph()
    try:
        with torch.cuda.stream(side):  # warm-up on a side stream, as capture requires
            for _ in range(3):
                fn()
        torch.cuda.current_stream(device).wait_stream(side)
        with torch.cuda.graph(graph):
            fn()
    except Exception as exc:  # noqa: BLE001 - any capture failure is the model's, said in one line
        torch.cuda.synchronize(device)
        return None, f"could not be captured into a CUDA graph: {type(exc).__name__}: {first_line(exc)}"
    torch.cuda.synchronize(device)
    return graph.replay, None


def _flush_bytes(device: torch.device) -> int:
    l2 = getattr(torch.cuda.get_device_properties(device), "L2_cache_size", 0) or 0
    return 2 * int(l2) if l2 > 0 else FALLBACK_FLUSH_BYTES


def _share(part: float, whole: float) -> str:
    return f"{part / whole * 100:.0f} %" if whole > 0 else "n/a"


def findings(result: ModesResult) -> list[str]:
    """The gaps between the modes' medians, in words."""
    sync, pipelined, graph = (result.median(name) for name in MODES)
    said: list[str] = []
    launch_bound = False
    if sync is not None and graph is not None:
        overhead = sync - graph
        gap = f"launch overhead ≈ {format_ms(overhead)} of {format_ms(sync)} (sync − graph, {_share(overhead, sync)})"
        launch_bound = overhead > LAUNCH_BOUND_SHARE * sync
        if launch_bound:
            said.append(f"launch-bound: {gap}: the GPU waits for Python; CUDA graphs or a larger batch would help")
        elif overhead > GAP_SHARE * sync:
            said.append(f"{gap}: a modest share; a CUDA graph would save about that")
        else:
            said.append(f"launch overhead small: sync − graph = {format_ms(overhead)} of {format_ms(sync)}: the GPU's "
                        "work, not Python, sets the pace")
    if sync is not None and pipelined is not None:
        hidden = sync - pipelined
        if hidden > GAP_SHARE * sync:
            said.append(f"pipelining hides {format_ms(hidden)} of {format_ms(sync)} (sync − pipelined, "
                        f"{_share(hidden, sync)}): back to back, one iteration's launches overlap the last one's "
                        "kernels; a server that queues requests sees the pipelined time, one request alone the sync")
        elif hidden < -GAP_SHARE * sync:
            said.append(f"pipelined reads {format_ms(-hidden)} above sync ({_share(-hidden, sync)}): back-to-back "
                        "iterations slow each other here (heat, memory, a busy box); the rounds' spread says how real")
        else:
            if result.device.startswith("cpu"):
                why = "on the CPU an iteration is synchronous, so the two measure the same thing"
            elif launch_bound:
                why = "the CPU's launches set the pace, and back to back they cannot get ahead of themselves"
            elif graph is not None:
                why = "the GPU's work sets the pace, so nothing is left to hide"
            else:
                why = "the GPU's work or the launches set the pace: graph mode would tell which"
            said.append(f"sync and pipelined agree within {GAP_SHARE * 100:.0f} % ({format_ms(sync)} vs "
                        f"{format_ms(pipelined)}): {why}")
    if result.cold_l2 and result.flush_bytes:
        said.append(f"cold L2: {format_bytes(result.flush_bytes)} written before each sync and graph iteration, "
                    "outside the timed region; pipelined iterations run back to back and keep it warm")
    return said + conditions_findings(result)


def conditions_findings(result: ModesResult) -> list[str]:
    """On a GPU: energy per inference in each mode, and a line for each mode that ran throttled more than the
    first one (whose gap to it may then be the clocks)."""
    measured = [m for m in result.modes if m.conditions is not None and m.conditions.gpu_index is not None]
    if not measured:
        return []
    said = []
    energies = [(m.mode, m.conditions.energy_per_item_j) for m in measured]
    if any(joules is not None for _, joules in energies):
        methods = sorted({m.conditions.energy_method for m in measured if m.conditions.energy_method})
        if result.cold_l2:
            methods.append("sync's and graph's include the L2 flush written before each of their iterations")
        said.append(f"energy per {per_item_word(result.step)}: "
                    + " · ".join(f"{mode} {format_energy(joules)}" for mode, joules in energies)
                    + f" ({'; '.join(methods)})")
    first = measured[0]
    notes = [throttle_note(first.conditions, other.conditions, names=(first.mode, other.mode), parts="samples",
                           effect="part of the gap between them may be the clocks") for other in measured[1:]]
    said += [note for note in notes if note]
    if not any(notes) and any(m.conditions.throttled for m in measured):
        reasons = dict.fromkeys(reason for m in measured for reason in m.conditions.slowdown_reasons)
        said.append(f"the modes ran throttled alike ({', '.join(reasons)}): their gaps stand, but every median is "
                    "of a GPU below its full clock")
    return said


def run_modes(cfg: BenchConfig, modes: tuple[str, ...] = MODES, *, cold_l2: bool = False,
              per_block: int = DEFAULT_PER_BLOCK, rounds: int = DEFAULT_ROUNDS,
              should_cancel: Callable[[], bool] | None = None, on_progress: OnProgress | None = None) -> ModesResult:
    """Time `cfg`'s model in each of `modes`: `cfg.iters` samples for sync and graph, and pipelined blocks of
    `per_block` iterations adding up to at least `cfg.iters` iterations (and three blocks a round), after
    `cfg.warmup` shared warm-up iterations. A mode that cannot run says why in its `unavailable`."""
    started = time.time()

    def modes_can_run(device, step) -> None:
        if per_block < 1 or rounds < 1 or cfg.iters < 1:
            raise TorchperfError("iterations, the block size and the rounds must each be at least 1")
        if cfg.compile is not None:
            raise TorchperfError("timing modes measure the eager model (graph mode captures it itself): drop --compile")
        if parse_schedule(cfg.shapes, seed=cfg.seed).varies:
            raise TorchperfError("timing modes need a fixed input shape: a CUDA graph replays one shape")
        if cold_l2 and device.type != "cuda":
            raise TorchperfError("--cold-l2 flushes a GPU's L2 cache between iterations: it needs --device cuda")

    def graph_can_run(device, step) -> None:
        if modes == ("graph",):  # nothing else would be measured: refuse before building the model
            if device.type != "cuda":
                raise TorchperfError(f"graph mode needs CUDA (a CUDA graph replays on a GPU), and this run is on "
                                     f"{device.type}: add sync or pipelined, e.g. --modes sync,pipelined")
            if step.training:
                raise TorchperfError("graph mode times inference only (a training step is not captured): add sync "
                                     "or pipelined, e.g. --modes sync,pipelined")

    plan = cfg.prepare(before_amp=modes_can_run, before_inputs=graph_can_run)
    device, dtype, step, shape = plan.device, plan.dtype, plan.step, plan.shape
    cancelled = should_cancel or (lambda: False)
    progress = on_progress or (lambda mode, done, total: None)
    results = {mode: ModeResult(mode) for mode in modes}
    blocks = max(MIN_BLOCKS_PER_ROUND * rounds, math.ceil(cfg.iters / per_block))
    wanted = {"sync": cfg.iters, "graph": cfg.iters, "pipelined": blocks}
    result = ModesResult(**cfg.input_facts(plan.inputs), model=cfg.model, device=str(device), input_shape=tuple(shape), dtype=dtype_name(dtype),
                         step=step.describe(), flags=cfg.flags.resolved(),  # the thread count said
                         modes=list(results.values()), per_block=per_block, rounds=rounds, cold_l2=cold_l2)

    work = prepare_workload(cfg.model, plan.inputs, device, dtype, cfg.channels_last, seed=cfg.seed,
                            model_args=cfg.model_args, quant=cfg.quant, attn=cfg.attn)
    sampler = conditions_sampler(device)  # None on the CPU; on CUDA, each mode's share of a round is a window
    windows: dict[str, list[str]] = {mode: [] for mode in modes}
    hosts = {mode: HostProbe(during="its shares of the rounds") for mode in modes}
    rounds_host = HostProbe(during="the rounds")
    try:
        passes = [0]  # completed calls: an error after some is the model failing, not its input rejected
        with applied_flags(cfg.flags), grad_context(step), \
                forward_errors(cfg.model, shape, dtype, device, calls_done=lambda: passes[0]):
            runner = StepRunner(work.model, step, device, seed=cfg.seed)
            x = work.x

            def once() -> object:
                out = runner(x)
                passes[0] += 1
                return out

            warm = run_timed_loop(once, device=device, warmup=cfg.warmup, iters=1, should_cancel=cancelled,
                                  budget_s=cfg.time_budget_s)  # the budget covers the warm-up, as bench's
            result.first_iter_ms = warm.first_iter_ms
            replay = None
            if "graph" in results:
                if device.type != "cuda":
                    results["graph"].unavailable = "CUDA graphs are GPU-only: sync and pipelined stand"
                elif step.training:
                    results["graph"].unavailable = ("a training step is not captured (its gradients and optimizer "
                                                    "state would need static, capturable buffers): sync and "
                                                    "pipelined stand")
                else:
                    replay, results["graph"].unavailable = _capture(once, device)
            flush = None
            if cold_l2:
                result.flush_bytes = _flush_bytes(device)
                flush = torch.empty(result.flush_bytes // 4, dtype=torch.float32, device=device).zero_
            timer = _events_ms if device.type == "cuda" else _clock_ms
            calls = {"sync": once, "graph": replay, "pipelined": once}
            running = [mode for mode in modes if results[mode].unavailable is None]
            if not running:  # e.g. graph alone, and the model could not be captured: a result would be empty
                raise TorchperfError("no timing mode could run: " + "; ".join(
                    f"{mode}: {results[mode].unavailable}" for mode in modes))
            result.cancelled = warm.cancelled
            rounds_host.begin()
            for round_ in range(rounds):
                order = running[round_ % len(running):] + running[:round_ % len(running)] if running else []
                for mode in order:
                    share = wanted[mode] * (round_ + 1) // rounds - wanted[mode] * round_ // rounds
                    window = f"{mode}{round_}"  # opened by its first sample: a share that times nothing has none
                    windows[mode].append(window)
                    hosts[mode].begin()
                    for i in range(share):
                        if result.cancelled or cancelled():
                            result.cancelled = True
                            break
                        if sampler is not None:
                            sampler.before_timed(window, i)  # outside the timer
                        if mode == "pipelined":
                            results[mode].samples_ms.append(timer(calls[mode], per_block))
                        else:
                            if flush is not None:
                                flush()  # queued ahead of the start event: outside the timed region
                            results[mode].samples_ms.append(timer(calls[mode], 1))
                        progress(mode, len(results[mode].samples_ms), wanted[mode])
                    hosts[mode].end()
                    if sampler is not None:
                        sampler.end(window)  # a cancelled share keeps its window: its samples are kept too
                if result.cancelled:
                    break
            rounds_host.end()
            del runner, replay, flush
    finally:
        work.release()
    batch = shape[0]
    for mode in results.values():
        mode.stats = compute_stats(mode.samples_ms, batch=batch)
        if mode.unavailable is None:
            mode.host_noise = hosts[mode.mode].summary(mode.samples_ms)
        if sampler is not None and mode.unavailable is None:
            per_sample = per_block if mode.mode == "pipelined" else 1
            mode.conditions = sampler.summary(windows[mode.mode], items=len(mode.samples_ms) * per_sample * batch)
    result.host_noise = rounds_host.summary([], spread="said per mode")
    result.duration_s = time.time() - started
    result.findings = findings(result)
    if warm.warmup_stopped:
        result.findings.insert(0, warmup_budget_text(cfg.time_budget_s, len(warm.warmup_ms), cfg.warmup))
    return result
