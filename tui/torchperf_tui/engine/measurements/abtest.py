"""A/B comparison that can be trusted: two arms interleaved in randomised blocks, timed, and judged on
paired block medians (engine/measurements/ab_result.py), since samples inside a block are correlated.

Two runs taken one after the other on a shared machine differ by several percent with nothing changed, so
the arms alternate block by block (A B / B A, the order of each pair drawn at random), each block under its
own flags context. The arms are parsed by engine/measurements/ab_arms.py.
"""

from __future__ import annotations

import dataclasses
import random
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Callable

from torchperf_tui.engine.measurements.watched import watched
from torchperf_tui.engine.measurements.ab_arms import ArmSpec, same_arms
from torchperf_tui.engine.measurements.ab_result import MIN_PAIRS, ABResult, ArmResult, block_verdict
from torchperf_tui.engine.hardware.condition_sampler import conditions_sampler
from torchperf_tui.core.errors import TorchperfError
from torchperf_tui.core.flag_table import FLAG_ENTRIES
from torchperf_tui.engine.measurements.flags import (applied_flags, asked_state, flag_applicability, Flags,
                                                     pristine_state, StateWatch)
from torchperf_tui.engine.hardware.host_noise import HostProbe
from torchperf_tui.engine.hardware.run_conditions import throttle_note
from torchperf_tui.core.formatting import format_ms
from torchperf_tui.engine.measurements.compile_cache import CompileCache
from torchperf_tui.engine.measurements.compile_cost import break_even_calls, compile_model, frames_compiled
from torchperf_tui.engine.measurements.timing import check_schedule_accepted, run_timed_loop
from torchperf_tui.engine.measurements.train_step import StepRunner, grad_context
from torchperf_tui.engine.workloads.input_spec import ShapeFeed
from torchperf_tui.engine.workloads.inputs import dtype_name, parse_dtype
from torchperf_tui.engine.workloads.shapes import parse_schedule
from torchperf_tui.engine.workloads.workload import forward_errors, prepare_workload
from torchperf_tui.engine.measurements.drift import Reference, changes_numerics, drift_between, forward_output

# Timed iterations per block when the caller leaves it open (per_block=None): fewer when, at the pass time measured
# before the blocks, all of them would not fit the time budget (a verdict needs pairs more than long blocks).
DEFAULT_PER_BLOCK = 20
# The share of the budget the planned blocks may take: a pass on a shared box often takes twice the one timed first
# (measured: 1.8x at load 2.6 on 2 cores), and the budget still stops whatever does not fit.
_BUDGET_SHARE = 0.6

AA_NOTE = ("A/A: both arms identical: any difference is noise (called significant in at most 5 % of such "
           "comparisons)")


def block_order(blocks: int, seed: int) -> list[str]:
    """A B / B A pairs in random order: each arm runs `blocks` times, and neither always goes first."""
    rng = random.Random(seed)
    order: list[str] = []
    for _ in range(blocks):
        order += ["A", "B"] if rng.random() < 0.5 else ["B", "A"]
    return order


class ArmThreads:
    """One long-lived thread per arm, each arm's work always run on its own thread.

    cuDNN (the v8 API PyTorch uses) keeps the conv algorithm it picked for a shape in a thread-local cache
    keyed by shape, dtype, deterministic and TF32, but not by cudnn.benchmark, and consults it before the
    flag: in one thread, whichever arm met a shape first would choose the algorithm for both, and
    benchmark=off vs on would compare the same kernels. (With TORCH_CUDNN_V8_API_DISABLED=1 the old API's
    cache is process-wide and this cannot separate the arms.)

    Only on CUDA (`separate=True`): on the CPU every calling thread gets an OpenMP pool of its own, and the
    idle arm's pool spin-waits on the cores the running arm needs, so there both arms run on the caller's
    thread.
    """

    def __init__(self, names, separate: bool = True) -> None:
        self._pools = {name: ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"torchperf-arm-{name}")
                       for name in names} if separate else {}

    def run(self, name: str, fn: Callable, *args):
        """Run `fn(*args)` on arm `name`'s thread (or the caller's) and wait for it; its exceptions are
        raised here."""
        if not self._pools:
            return fn(*args)
        return self._pools[name].submit(fn, *args).result()

    def __enter__(self) -> "ArmThreads":
        return self

    def __exit__(self, *exc) -> None:
        for pool in self._pools.values():
            pool.shutdown(wait=True)


OnBlock = Callable[[str, int, int, list[float]], None]


def _key(arm: ArmResult) -> tuple:
    """The arm's model, which arms alike share (BenchConfig.model_key)."""
    return arm.config.model_key()


def _drifts(base, arms: dict, workloads: dict, references: dict, steps: dict, numerics: dict, device):
    """Once, untimed, before the blocks: each arm's outputs under its own flags and mixed precision; an arm that
    changes numerics gets its drift from the float32 model, and B's drift against A is returned."""
    outputs = {}
    for name, arm in arms.items():
        work = workloads[_key(arm)]
        with applied_flags(arm.flags), forward_errors(base.model, work.shape, work.dtype, device):
            outputs[name], what = forward_output(work.model, work.x, steps[name].amp, device.type)
        reference = references[_key(arm)]
        if numerics[name] and reference is not None:
            arm.drift = reference.drift_of(outputs[name])
    return drift_between(outputs["A"], outputs["B"], "arm A's outputs", what)


def run_ab(base, a: ArmSpec, b: ArmSpec, *, blocks: int = 10, per_block: int | None = DEFAULT_PER_BLOCK, seed: int = 0,
           on_block: OnBlock | None = None, should_cancel: Callable[[], bool] | None = None,
           time_budget_s: float | None = None) -> ABResult:
    """Time arms A and B of `base` (a bench_config.BenchConfig) interleaved in randomised blocks.

    `time_budget_s` (None: none) bounds the blocks' time: a block pair that would end past it, judged by the
    pair before it, is not started; the result says how many pairs ran (`out_of_time`) and the verdict is
    from those. `per_block=None`: DEFAULT_PER_BLOCK timed iterations per block, or fewer when one pass of each arm,
    timed before the blocks, says that all the blocks would not fit the budget (a note says so): on a slow model
    the budget then ends in a verdict rather than after one or two long pairs.

    Each block runs under its arm's own flags context, on a CUDA device on its arm's own thread (see
    ArmThreads), and starts
    with one discarded iteration plus one warm-up (a flag change such as the thread count needs a pass to
    settle). `on_block(arm, index, total,
    samples)` is called after each block; `should_cancel()` is checked between iterations. What the model's
    code changes in torch's global state is put back at the end and said in `state_notes`.

    An arm may be torch.compiled (its SPEC's compile=MODE; the base's own compile is not taken: the other arm runs
    eager). It compiles once before the blocks, with an empty cache of its own (a cold start), and its compile time is
    said apart with the passes after which it pays for itself at the two arms' medians.
    """
    mode = compiled_mode(base, a, b)
    with CompileCache(mode) as cache, cache.in_use():
        return watched(lambda watch: _run_ab(base, a, b, blocks, per_block, seed, on_block, should_cancel, watch,
                                             time_budget_s))


def compiled_mode(base, a: ArmSpec, b: ArmSpec) -> str | None:
    """The compile mode of the A/B's compiled arm (None: both eager). Refused: both arms compiled (they would share
    one model's compiled code and its caches, and each compile clears the other's)."""
    modes = [spec.compile for spec in (a, b) if spec.compile not in (None, "eager")]
    if len(modes) > 1:
        raise TorchperfError("an A/B compiles one arm at most: compile=MODE against the eager base (both arms "
                             "compiled would share one model's compiled code)")
    return modes[0] if modes else None


def _run_ab(base, a: ArmSpec, b: ArmSpec, blocks: int, per_block: int | None, seed: int, on_block: OnBlock | None,
            should_cancel: Callable[[], bool] | None, watch: StateWatch, time_budget_s: float | None) -> ABResult:
    import torch

    base = dataclasses.replace(base, compile=None)  # an arm compiles where its own SPEC says so

    if blocks < MIN_PAIRS:
        raise TorchperfError(f"a comparison needs at least {MIN_PAIRS} blocks per arm, got {blocks} (with fewer "
                             "pairs the signed-rank test can never reach p < 0.05)")
    if per_block is not None and per_block < 1:
        raise TorchperfError(f"samples per block must be at least 1, got {per_block}")
    started = time.time()
    steps = {"A": a.step_spec(base), "B": b.step_spec(base)}
    plan = base.prepare(amp_for=[(steps["A"], a.dtype or base.dtype), (steps["B"], b.dtype or base.dtype)], arms=(a, b))
    device, shape = plan.device, plan.shape
    cancelled = should_cancel or (lambda: False)
    arms = {}
    schedules = {}
    checked = set()  # (schedule, dtype) pairs already run through the model on meta
    for name, spec in (("A", a), ("B", b)):
        run = spec.run_of(base, device=str(device), input_shape=tuple(shape), batch=None, dtype=dtype_name(plan.dtype))
        schedule = parse_schedule(run.shapes, seed=seed)
        schedules[name] = schedule
        step = steps[name]
        arms[name] = ArmResult(spec=spec.text, flags=spec.flags, dtype=spec.dtype or base.dtype,
                               channels_last=run.channels_last, blocks=[], shapes=schedule.describe(), step=step.step,
                               optimizer=step.optimizer if step.training else None, amp=step.amp,
                               threads_asked=asked_state(spec.flags).flags.num_threads, config=run)
        if run.compile is not None and schedule.varies:
            raise TorchperfError(f"arm {name} compiles: give it fixed shapes (shapes={run.shapes} would recompile "
                                 "inside its blocks, timing the compiler)")
        if schedule.varies and (schedule.describe(), arms[name].dtype) not in checked:
            check_schedule_accepted(base.model, schedule, plan.inputs, arms[name].dtype, base.model_args)
            checked.add((schedule.describe(), arms[name].dtype))
    workloads = {}
    numerics = {name: changes_numerics(arm.config, device.type) for name, arm in arms.items()}
    references = {}  # per workload that changes numerics: the float32 output of its weights
    for name, arm in arms.items():
        key = _key(arm)
        if key not in workloads:
            references[key] = Reference(device.type) if any(numerics.values()) else None
            workloads[key] = prepare_workload(base.model, plan.inputs, device, parse_dtype(arm.dtype),
                                              arm.channels_last, model_args=base.model_args, quant=arm.config.quant,
                                              attn=arm.config.attn,
                                              before_cast=references[key].take if references[key] else None)
        arm.quantized = workloads[key].quantized
    forwards = {name: _compiled(arm, workloads[_key(arm)], steps[name], device) for name, arm in arms.items()}
    watch.built()
    drift_b = _drifts(base, arms, workloads, references, steps, numerics, device) if any(numerics.values()) else None
    references.clear()
    # A training step changes the weights (and batch norm's statistics): when either arm trains, every block
    # of either arm starts from the state the model was built in (a training arm with a fresh optimizer), so
    # neither arm trains on, or infers with, the other's steps.
    training = any(step.training for step in steps.values())
    initial = ({key: {k: v.detach().clone() for k, v in work.model.state_dict().items()}
                for key, work in workloads.items()} if training else {})
    fitted = None  # the note when per_block was fitted to the budget
    if per_block is None:
        per_block = DEFAULT_PER_BLOCK
        if time_budget_s is not None:
            pass_s = {name: _one_pass_s(workloads[_key(arm)], arm.flags, steps[name], device,
                                        seed, cancelled, forwards[name]) for name, arm in arms.items()}
            per_block, fitted = fit_per_block(blocks, time_budget_s, pass_s)
    # Each arm follows its own schedule across its blocks (the same seeded sequence for both arms, so a
    # random schedule shows them the same shapes in the same order); the block's settling iteration
    # runs the configured shape.
    feeds = {name: ShapeFeed(workloads[_key(arm)].x, plan.inputs,
                             schedules[name].stream(shape, sequence=plan.inputs.tokens), parse_dtype(arm.dtype), device,
                             arm.channels_last, seed, None)
             for name, arm in arms.items()}
    done = {"A": 0, "B": 0}
    order = block_order(blocks, seed)
    stopped = False
    # The GPU's clocks and energy, read beside both arms' blocks: each block's timed iterations are a window
    # labelled by arm and block, so that only complete pairs count and each arm's throttling is its own.
    sampler = conditions_sampler(device)

    def run_block(name: str):
        arm = arms[name]
        work = workloads[_key(arm)]
        model, feed, base_x = work.model, feeds[name], work.x

        window = f"{name}{len(arms[name].blocks)}"

        def before(phase: str, i: int) -> None:
            if phase == "timed":
                if sampler is not None:  # outside the timer
                    sampler.before_timed(window, i)
                feed.advance(done[name])
                done[name] += 1
            elif feed.shape != tuple(shape):  # the settling iterations: the configured shape
                feed.x, feed.shape = base_x, tuple(shape)

        step = steps[name]
        if training:
            model.load_state_dict(initial[_key(arm)])
        with applied_flags(arm.flags), grad_context(step), forward_errors(base.model, shape, work.dtype, device):
            runner = StepRunner(model, step, device, seed=seed, forward=forwards[name])
            times = run_timed_loop(lambda: runner(feed.x), device=device, warmup=1, iters=per_block,
                                   should_cancel=cancelled, before_iteration=before)
            if sampler is not None:
                sampler.close(window, keep=not times.cancelled)  # a cancelled block is dropped with its samples
            watch.ran(arm.flags, during=f"arm {name}'s blocks")
            # The count of the block just run; one the model's code set in any block is kept, not hidden by the
            # blocks after it (each starts at the asked count again).
            if arm.threads_used is None or arm.threads_used == arm.threads_asked:
                arm.threads_used = torch.get_num_threads()
        return times

    out_of_time = None
    host = HostProbe()  # read at the edges of the interleaved blocks, outside every block's timer
    frames_before = frames_compiled() if any(arm.compile_s is not None for arm in arms.values()) else None
    try:
        with ArmThreads(arms, separate=device.type == "cuda") as threads:
            host.begin()
            timed_from = time.perf_counter()
            pair_started = timed_from
            last_pair_s = 0.0
            for index, name in enumerate(order):
                if index % 2 == 0:  # a pair starts: stop here if it would end past the budget
                    now = time.perf_counter()
                    if index:
                        last_pair_s = now - pair_started
                    pair_started = now
                    if time_budget_s is not None and index and now - timed_from + last_pair_s > time_budget_s:
                        out_of_time = (f"time budget {time_budget_s:g} s reached after {index // 2} of {blocks} "
                                       f"block pairs")
                        break
                times = threads.run(name, run_block, name)
                if times.cancelled:
                    stopped = True
                    break
                arms[name].blocks.append(times.samples_ms)
                if on_block is not None:
                    on_block(name, index, len(order), times.samples_ms)
            host.end()
    finally:
        for feed in feeds.values():
            feed.x = None
        for work in workloads.values():
            work.release()
    # Only complete pairs count: a cancelled run can leave one arm a block ahead.
    pairs = min(len(arms["A"].blocks), len(arms["B"].blocks))
    for name, arm in arms.items():
        arm.blocks = arm.blocks[:pairs]
        arm.first_seen = sum(feeds[name].first_seen[:pairs * per_block])
        arm.summarise(seed=seed)
        if sampler is not None:
            items = sum(shape[0] for shape in feeds[name].fed[:pairs * per_block])
            arm.conditions = sampler.summary([f"{name}{i}" for i in range(pairs)], items=items)
        # Each arm's spread over its own samples: pooled, the two arms' speeds would read as spread.
        arm.host_noise = host.summary(arm.samples_ms, spread=not schedules[name].varies)
    host_noise = host.summary([*arms["A"].samples_ms, *arms["B"].samples_ms]).host_only("said per arm")
    compiled_notes = compile_notes(arms, frames_before)
    verdict = block_verdict(arms["A"].blocks, arms["B"].blocks, seed=seed) if pairs >= MIN_PAIRS else None
    notes = [AA_NOTE] if same_arms(base, a, b, default_threads=pristine_state().flags.num_threads) else []
    notes += [fitted] if fitted else []
    notes += inert_arm_flags(base.flags, arms["A"].flags, arms["B"].flags, device.type)
    notes += step_notes(arms["A"], arms["B"])
    notes += compiled_notes
    clocks = throttle_note(arms["A"].conditions, arms["B"].conditions)
    if clocks:
        notes.append(clocks)
    # The result's step and amp are what both arms did; where the arms differ they are said per arm.
    same = arms["A"].step == arms["B"].step and arms["A"].optimizer == arms["B"].optimizer
    return ABResult(**base.input_facts(plan.inputs), model=base.model, device=str(device), input_shape=tuple(shape), a=arms["A"], b=arms["B"],
                    order=order, verdict=verdict, cancelled=stopped, duration_s=time.time() - started, drift_b=drift_b,
                    notes=notes, step=arms["A"].step if same else "mixed",
                    optimizer=arms["A"].optimizer if same else None,
                    amp=arms["A"].amp if arms["A"].amp == arms["B"].amp else "mixed", out_of_time=out_of_time,
                    host_noise=host_noise)


def _compiled(arm: ArmResult, work, step, device):
    """The forward an arm runs: None (the model itself) for an eager arm; a compiled arm's model compiled here, under
    its flags and step, its first call (the compile) timed apart. A compile that fails leaves the arm eager, said."""
    mode = arm.config.compile
    if mode is None:
        return None
    with applied_flags(arm.flags), grad_context(step), forward_errors(work.name, work.shape, work.dtype, device):
        compiling = compile_model(work.model, work.x, mode, device)
    arm.compile_s, arm.compile_error = compiling.compile_s, compiling.error
    return compiling.forward if compiling.compiled else None


def compile_notes(arms: dict[str, ArmResult], frames_before: int | None) -> list[str]:
    """A compiled arm's compile, said apart from its blocks: its time, and the passes after which it pays for itself
    at the two arms' medians; or why it ran eager; and a recompile inside the blocks."""
    notes = []
    for name, arm in arms.items():
        other = arms["B" if name == "A" else "A"]
        if arm.compile_error is not None:
            notes.append(f"arm {name} ran eager: {arm.compile_error}")
        if arm.compile_s is None:
            continue
        mode = arm.config.compile
        pays = (break_even_calls(arm.compile_s, other.median_ms, arm.median_ms)
                if arm.median_ms is not None and other.median_ms is not None else None)
        notes.append(f"arm {name} compiled ({mode}) in {arm.compile_s:.1f} s before its blocks, not timed in them; "
                     + (f"at the two arms' medians it pays for itself after {pays:,} passes" if pays is not None
                        else "at the two arms' medians it never pays for itself (not faster)"))
    frames_after = frames_compiled() if frames_before is not None else None
    if frames_before is not None and frames_after is not None and frames_after > frames_before:
        notes.append(f"the compiled arm compiled again inside its blocks ({frames_after - frames_before} frame"
                     f"{'s' if frames_after - frames_before != 1 else ''}): those samples include the compiler")
    return notes


def _one_pass_s(work, flags: Flags, step, device, seed: int, cancelled: Callable[[], bool], forward=None) -> float:
    """One pass of an arm, under its flags, after a discarded one (which pays the one-off costs), in seconds. The first
    passes of the arm: what the model raises here (a training step at batch 1 through a batch norm) is said as a
    block's would be (forward_errors: a rejected input is one line, exit 2), not as a failure of ours."""
    with applied_flags(flags), grad_context(step), forward_errors(work.name, work.shape, work.dtype, device):
        runner = StepRunner(work.model, step, device, seed=seed, forward=forward)
        times = run_timed_loop(lambda: runner(work.x), device=device, warmup=0, iters=1, should_cancel=cancelled)
    return times.samples_ms[-1] / 1000.0 if times.samples_ms else 0.0


def fit_per_block(blocks: int, budget_s: float, pass_s: dict[str, float]) -> tuple[int, str | None]:
    """The timed iterations per block that let all `blocks` pairs fit `budget_s`, at `pass_s` seconds a pass per
    arm (each block also runs two passes that are not timed), at most DEFAULT_PER_BLOCK and at least one; and the
    note that says so when it is fewer than DEFAULT_PER_BLOCK, else None."""
    pair_s = sum(pass_s.values())
    if pair_s <= 0:
        return DEFAULT_PER_BLOCK, None
    fit = int(budget_s * _BUDGET_SHARE / (blocks * pair_s)) - 2
    if fit >= DEFAULT_PER_BLOCK:
        return DEFAULT_PER_BLOCK, None
    per_block = max(1, fit)
    passes = " and ".join(f"{name} {format_ms(s * 1000)}" for name, s in pass_s.items())
    passes_word = "pass" if per_block == 1 else "passes"
    return per_block, (f"{per_block} timed {passes_word} per block, not {DEFAULT_PER_BLOCK}: at a pass of {passes}, "
                       f"{blocks} block pairs of {DEFAULT_PER_BLOCK} would not fit the {budget_s:g} s time budget")


def inert_arm_flags(base: Flags, a: Flags, b: Flags, device: str) -> list[str]:
    """One line per flag the arms differ in that has no effect on `device`, naming the arm that set it away
    from the base run (so a flag arm A set is not blamed on B): a same-speed verdict is not that flag's."""
    lines = []
    for spec in FLAG_ENTRIES:
        values = {"A": getattr(a, spec.name), "B": getattr(b, spec.name)}
        if values["A"] == values["B"]:
            continue
        ok, why = flag_applicability(spec.name, device)
        if ok:
            continue
        setters = [name for name, value in values.items() if value != getattr(base, spec.name)] or ["A", "B"]
        lines.append(f"arm {' and '.join(setters)}: {spec.label} has no effect here: {why}")
    return lines


def arm_step_text(arm: ArmResult) -> str:
    """'train (sgd) · amp fp16', 'infer': what one of the arm's iterations did."""
    text = f"train ({arm.optimizer})" if arm.step == "train" else "infer"
    return text + (f" · amp {arm.amp}" if arm.amp else "")


def step_notes(a: ArmResult, b: ArmResult) -> list[str]:
    """What a reader of the ratio must know when the arms ran different iterations."""
    if (a.step, a.optimizer, a.amp) == (b.step, b.optimizer, b.amp):
        return []
    notes = [f"the arms ran different iterations: A {arm_step_text(a)}, B {arm_step_text(b)}; B/A is the cost of "
             f"one against the other, not a flag's effect"]
    if a.amp != b.amp and "train" in (a.step, b.step):
        scaler = " (fp16 with a gradient scaler)" if "fp16" in (a.amp, b.amp) else ""
        notes.append("mixed precision changes the numbers a training step computes as well as its time"
                     f"{scaler}: check its loss before trusting the speed-up")
    return notes
