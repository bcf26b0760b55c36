"""A/B comparison that can be trusted: two arms interleaved in randomised blocks, and a verdict that
respects that samples inside a block are correlated.

Two runs taken one after the other on a shared machine differ by several percent with nothing changed, so
the arms alternate block by block (A B / B A, the order of each pair drawn at random), each block under its
own flags context. The verdict works on paired block medians: the ratio is the median over pairs of
B_i / A_i (block i of B against its neighbour block i of A, so drift the two share cancels), with a
bootstrap 95 % CI of that median and a Wilcoxon signed-rank test on the paired log-ratios. A difference is
called real only when both agree (p < alpha and the CI excludes 1). (A ratio of the two arms' overall
medians would carry the block-to-block drift into the CI and miss real differences on a busy machine.)
"""

from __future__ import annotations

import random
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field, fields
from typing import Callable

import numpy as np

from torchperf_tui.engine.errors import FlagError, TorchperfError
from torchperf_tui.engine.flags import Flags, StateWatch, applied_flags, asked_state
from torchperf_tui.engine.host_noise import HostNoise, HostProbe
from torchperf_tui.engine.run_conditions import RunConditions, conditions_sampler, throttle_note

ALPHA = 0.05
# Block pairs a verdict (and an arm's CI) needs; a cancelled comparison may have fewer. Six, not five: with 5
# pairs the exact two-sided signed-rank test's smallest p is 2/32 = 0.0625, so it could never call a difference
# (seen on an H100: B/A 0.70 with a CI of 0.69-0.71 read "no significant difference"); with 6 it is 0.031.
MIN_PAIRS = 6
CONFIDENCE = 0.95

# SPEC keys: flag names the user types -> (Flags field(s), value parser); run settings apart.
_BOOL_WORDS = {"1": True, "true": True, "on": True, "yes": True, "0": False, "false": False, "off": False,
               "no": False}
FLAG_KEYS: dict[str, tuple[str, ...]] = {
    "cudnn_benchmark": ("cudnn_benchmark",),
    "benchmark": ("cudnn_benchmark",),
    "deterministic": ("cudnn_deterministic",),
    "cudnn_deterministic": ("cudnn_deterministic",),
    "deterministic_algorithms": ("deterministic_algorithms",),
    "cudnn_enabled": ("cudnn_enabled",),
    "tf32": ("tf32_matmul", "tf32_cudnn"),
    "mkldnn": ("mkldnn_enabled",),
    "threads": ("num_threads",),
}
SETTING_KEYS = ("dtype", "channels_last", "shapes", "step", "optimizer", "amp")


@dataclass(frozen=True)
class ArmSpec:
    """One arm: backend flags, and run settings that differ from the base run (None: as the base)."""

    flags: Flags
    dtype: str | None = None
    channels_last: bool | None = None
    shapes: str | None = None  # an input-shape schedule (engine/shapes.py), e.g. "random:192-288"
    text: str = ""
    step: str | None = None  # "infer" or "train"
    optimizer: str | None = None  # a training step's: "sgd" or "adamw"
    amp: str | None = None  # "fp16", "bf16", or "off" (mixed precision off where the base has it on)

    def step_spec(self, base):
        """This arm's StepSpec: its own step, optimizer and mixed precision where it sets them, else the base's."""
        from torchperf_tui.engine.train_step import StepSpec

        base_step = base.step_spec()
        amp = base_step.amp if self.amp is None else (None if self.amp == "off" else self.amp)
        return StepSpec(step=self.step or base_step.step, optimizer=self.optimizer or base_step.optimizer, amp=amp)


def _parse_bool(key: str, value: str) -> bool:
    try:
        return _BOOL_WORDS[value.strip().lower()]
    except KeyError:
        raise FlagError(f"{key}={value!r}: expected on/off, true/false or 1/0") from None


def parse_arm_spec(text: str, base: Flags | None = None) -> ArmSpec:
    """'threads=2,cudnn_benchmark=on' -> ArmSpec. An empty spec is the base run unchanged. Needs no torch (the
    CLI's process parses the SPECs before it sends the job): a dtype is checked and named by its text."""
    from torchperf_tui.engine.inputs import canonical_dtype

    flags = base or Flags()
    dtype: str | None = None
    channels_last: bool | None = None
    shapes: str | None = None
    steps: dict[str, str | None] = {}
    given: dict[str, str] = {}  # what a key sets (aliases set the same thing) -> the key as typed
    for part in [p.strip() for p in text.split(",") if p.strip()]:
        key, sep, value = part.partition("=")
        key = key.strip().lower().replace("-", "_")
        if not sep or not value.strip():
            raise FlagError(f"{part!r} in {text!r}: write key=value, e.g. threads=2")
        for target in FLAG_KEYS.get(key, (key,)):
            if target in given:  # 'mkldnn=on,mkldnn=off': which one would the arm mean?
                same = "given twice" if given[target] == key else f"set by both {given[target]} and {key}"
                raise FlagError(f"{key} {same} in {text!r}: give each setting once per arm")
            given[target] = key
        if key in FLAG_KEYS:
            targets = FLAG_KEYS[key]
            if key == "threads":
                from torchperf_tui.options import thread_count

                flags = flags.replace(num_threads=thread_count(value.strip()))
            else:
                on = _parse_bool(key, value)
                flags = flags.replace(**{target: on for target in targets})
        elif key == "dtype":
            dtype = canonical_dtype(value)  # 'fp16' -> 'float16', the name torch gives the dtype
        elif key == "channels_last":
            channels_last = _parse_bool(key, value)
        elif key == "shapes":
            from torchperf_tui.engine.shapes import parse_schedule

            shapes = parse_schedule(value).describe()
        elif key in ("step", "optimizer", "amp"):
            from torchperf_tui.engine.train_step import check_amp, check_optimizer, check_step

            word = value.strip().lower()
            check = {"step": check_step, "optimizer": check_optimizer, "amp": check_amp}[key]
            try:
                steps[key] = word if key == "amp" and word == "off" else check(word)
            except TorchperfError as exc:
                raise FlagError(f"{part!r} in {text!r}: {exc}") from None
        else:
            known = ", ".join([*FLAG_KEYS, *SETTING_KEYS])
            raise FlagError(f"unknown key {key!r} in {text!r}: known keys are {known}")
    return ArmSpec(flags=flags, dtype=dtype, channels_last=channels_last, shapes=shapes,
                   text=text.strip() or "base", **steps)


def same_arms(base, a: ArmSpec, b: ArmSpec) -> bool:
    """Whether arms `a` and `b` of `base` (a bench_config.BenchConfig) would run the same thing: an A/A comparison."""
    def effective(arm: ArmSpec):
        return (arm.flags, arm.dtype or base.dtype,
                base.channels_last if arm.channels_last is None else arm.channels_last,
                arm.shapes or base.shapes, arm.step_spec(base))

    return effective(a) == effective(b)


def same_arms_refusal(remedy: str, flags_text: str = "") -> str:
    """The one sentence that refuses two identical arms, in the CLI and the app alike: `flags_text` the arms'
    flags where the reader has not typed them, `remedy` what to do instead where the refusal is met."""
    flags = f" ({flags_text})" if flags_text else ""
    return f"arms A and B are the same flags{flags}: nothing to compare; {remedy}"


AA_NOTE = ("A/A: both arms identical: any difference is noise (called significant in at most 5 % of such "
           "comparisons)")


@dataclass(frozen=True)
class Verdict:
    """B against A on paired block medians. ratio = median over pairs of B_i / A_i: below 1, B is faster."""

    blocks: int
    ratio: float
    ci_low: float
    ci_high: float
    p_value: float
    significant: bool
    alpha: float = ALPHA

    def summary(self) -> str:
        ci = f"{self.ci_low:.3f}-{self.ci_high:.3f}"
        if not self.significant:
            if not (self.ci_low <= 1.0 <= self.ci_high):  # the two tests disagree: say so, not just "no"
                return (f"no significant difference: the CI {ci} of B/A per block pair {self.ratio:.2f} excludes 1, "
                        f"but the "
                        f"signed-rank test does not agree (p={self.p_value:.3g}); more blocks would settle it")
            return (f"no significant difference (B/A per block pair {self.ratio:.2f}, CI {ci}, "
                    f"p={self.p_value:.3g})")
        if self.ratio >= 2 or self.ratio <= 0.5:  # "761.6 % slower" reads worse than "8.62x slower"
            times, word = (self.ratio, "slower") if self.ratio > 1 else (1 / self.ratio, "faster")
            lo, hi = sorted((self.ci_low, self.ci_high) if self.ratio > 1 else (1 / self.ci_high, 1 / self.ci_low))
            return f"B is {times:.2f}x {word} (95 % CI {lo:.2f}-{hi:.2f}x, p={self.p_value:.3g})"
        faster = self.ratio < 1
        change = (1 / self.ratio - 1) * 100 if faster else (self.ratio - 1) * 100
        lo, hi = sorted(((1 / self.ci_high - 1) * 100, (1 / self.ci_low - 1) * 100) if faster
                        else ((self.ci_low - 1) * 100, (self.ci_high - 1) * 100))
        word = "faster" if faster else "slower"
        return f"B is {change:.1f} % {word} (95 % CI {lo:.1f}-{hi:.1f} %, p={self.p_value:.3g})"

    def to_dict(self) -> dict:
        return asdict(self)


def block_verdict(a_blocks: list[list[float]], b_blocks: list[list[float]], seed: int = 0) -> Verdict:
    """The verdict from per-block samples of each arm (block i of A is paired with block i of B)."""
    from scipy import stats

    if len(a_blocks) != len(b_blocks):
        raise TorchperfError("the two arms need the same number of blocks")
    if len(a_blocks) < MIN_PAIRS:
        raise TorchperfError(f"a verdict needs at least {MIN_PAIRS} blocks per arm, got {len(a_blocks)}")
    a = np.array([np.median(block) for block in a_blocks], dtype=np.float64)
    b = np.array([np.median(block) for block in b_blocks], dtype=np.float64)
    log_ratios = np.log(b) - np.log(a)
    ratio = float(np.exp(np.median(log_ratios)))
    if np.all(log_ratios == 0):
        p_value, low, high = 1.0, 1.0, 1.0
    else:
        p_value = float(stats.wilcoxon(log_ratios, zero_method="wilcox", alternative="two-sided").pvalue)
        boot = stats.bootstrap((log_ratios,), np.median, vectorized=True, confidence_level=CONFIDENCE,
                               n_resamples=4999, method="percentile", random_state=np.random.default_rng(seed))
        low, high = float(np.exp(boot.confidence_interval.low)), float(np.exp(boot.confidence_interval.high))
    significant = p_value < ALPHA and not (low <= 1.0 <= high)
    return Verdict(blocks=len(a), ratio=ratio, ci_low=low, ci_high=high, p_value=p_value,
                   significant=significant, alpha=ALPHA)


def block_order(blocks: int, seed: int) -> list[str]:
    """A B / B A pairs in random order: each arm runs `blocks` times, and neither always goes first."""
    rng = random.Random(seed)
    order: list[str] = []
    for _ in range(blocks):
        order += ["A", "B"] if rng.random() < 0.5 else ["B", "A"]
    return order


@dataclass
class ArmResult:
    """One arm's samples, block by block, and their summary (per-iteration stats pooled over blocks)."""

    spec: str
    flags: Flags
    dtype: str
    channels_last: bool
    blocks: list[list[float]]
    shapes: str = "fixed"
    first_seen: int = 0  # timed iterations that met their input shape for the first time
    median_ms: float | None = None
    p90_ms: float | None = None
    p99_ms: float | None = None
    ci_low_ms: float | None = None  # bootstrap 95 % CI of the median of the block medians
    ci_high_ms: float | None = None
    step: str = "infer"  # what one of this arm's iterations did
    optimizer: str | None = None  # a training step's
    amp: str | None = None  # its mixed precision
    conditions: RunConditions | None = None  # CUDA: the GPU's clocks, throttling and energy over its blocks
    threads_used: int | None = None  # torch's intra-op thread count in the arm's blocks, as torch reported it
    # The count the arm asked for: its flags' own, else the process's baseline. A `threads_used` unlike it was set
    # by the model's code (in one block at least): said so, never "(default)".
    threads_asked: int | None = None
    # The host over the comparison's blocks (the same figures on both arms) and the spread of this arm's samples.
    host_noise: HostNoise | None = None

    def flags_text(self, device: str) -> str:
        """The arm's flags with the thread count it ran on: 'threads=2 (default)', 'threads=1 (set by the model's
        code; default 2)'."""
        return self.flags.describe(device, threads_used=self.threads_used,
                                   default_threads=getattr(self, "threads_asked", None))

    @property
    def samples_ms(self) -> list[float]:
        return [ms for block in self.blocks for ms in block]

    def summarise(self, seed: int = 0) -> None:
        samples = self.samples_ms
        if samples:
            self.median_ms, self.p90_ms, self.p99_ms = (float(v) for v in np.percentile(samples, [50, 90, 99]))
        medians = np.array([np.median(block) for block in self.blocks if block], dtype=np.float64)
        if medians.size >= MIN_PAIRS and np.ptp(medians) > 0:  # a CI from one or two blocks says nothing
            from scipy import stats

            boot = stats.bootstrap((medians,), np.median, vectorized=True, confidence_level=CONFIDENCE,
                                   n_resamples=2999, method="percentile", random_state=np.random.default_rng(seed))
            self.ci_low_ms = float(boot.confidence_interval.low)
            self.ci_high_ms = float(boot.confidence_interval.high)
        elif medians.size >= MIN_PAIRS:  # every block the same median: the CI is that value
            self.ci_low_ms = self.ci_high_ms = float(medians[0])
        else:
            self.ci_low_ms = self.ci_high_ms = None


@dataclass
class ABResult:
    model: str
    device: str
    input_shape: tuple[int, ...]
    a: ArmResult
    b: ArmResult
    order: list[str]
    verdict: Verdict | None
    cancelled: bool
    duration_s: float
    notes: list[str] = field(default_factory=list)
    step: str = "infer"  # what one iteration of both arms did: "infer" or "train"
    optimizer: str | None = None  # a training step's
    amp: str | None = None  # mixed precision of both arms
    # What the model's code changed in torch's global state during the comparison, put back (engine.flags).
    state_notes: list[str] = field(default_factory=list)
    out_of_time: str | None = None  # the time budget stopped the blocks short: how far they got, in words
    # The host over the interleaved blocks (load, other processes' CPU; each arm's spread is on the arm), and what
    # the app saw happen beside them (a resize, heavy redraws), set by the UI process when the result reaches it.
    # Both end up in the two arms' history records' `disturbed`.
    host_noise: HostNoise | None = None
    disturbed: list[str] = field(default_factory=list)

    def disturbance_marks(self) -> list[str]:
        """Every reason the comparison's numbers may not be the arms' alone, one line each: what the app saw, the
        host, then each arm's samples ('arm B: noisy samples: p50 is 3.1x the fastest sample')."""
        host = self.host_noise.warnings() if self.host_noise is not None else []
        arms = [f"arm {name}: {line}" for name, arm in (("A", self.a), ("B", self.b))
                if getattr(arm, "host_noise", None) is not None for line in arm.host_noise.sample_warnings()]
        return [*self.disturbed, *host, *arms]

    @property
    def pairs(self) -> int:
        return min(len(self.a.blocks), len(self.b.blocks))

    def summary(self) -> str:
        if self.verdict is None:
            why = (f"cancelled after {self.pairs} block pair(s)" if self.cancelled
                   else self.out_of_time or "too few blocks")
            return f"no verdict: {why} (a verdict needs {MIN_PAIRS})"
        head = (f"cancelled after {self.pairs} block pairs; " if self.cancelled
                else f"{self.out_of_time}; " if self.out_of_time else "")
        return head + self.verdict.summary()

    def medians_ratio(self) -> float | None:
        """B/A of the two arms' medians over all their samples (what a speed-up column shows)."""
        if not self.a.median_ms or self.b.median_ms is None:
            return None
        return self.b.median_ms / self.a.median_ms

    def ratio_note(self) -> str | None:
        """When the arms' medians say something the paired ratio does not (outside its CI), why: a line."""
        pooled, verdict = self.medians_ratio(), self.verdict
        if pooled is None or verdict is None or verdict.ci_low <= pooled <= verdict.ci_high:
            return None
        return (f"the arms' overall medians give B/A {pooled:.2f}, outside the paired CI: the machine's speed "
                f"drifted during the comparison (some blocks ran slower for both arms), which pooled medians "
                f"count and the paired ratio, block against its neighbour, does not")

    def to_dict(self) -> dict:
        data = {f.name: getattr(self, f.name) for f in fields(self)}
        for arm in ("a", "b"):
            arm_result = getattr(self, arm)
            noise = getattr(arm_result, "host_noise", None)
            data[arm] = {**asdict(arm_result), "flags": arm_result.flags.to_dict(),
                         "conditions": arm_result.conditions.to_dict() if arm_result.conditions else None,
                         "host_noise": noise.to_dict() if noise is not None else None}
        data["input_shape"] = list(self.input_shape)
        data["host_noise"] = self.host_noise.to_dict() if self.host_noise is not None else None
        data["disturbance_marks"] = self.disturbance_marks()
        data["verdict"] = self.verdict.to_dict() if self.verdict else None
        data["summary"] = self.summary()
        return data


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


def run_ab(base, a: ArmSpec, b: ArmSpec, *, blocks: int = 10, per_block: int = 20, seed: int = 0,
           on_block: OnBlock | None = None, should_cancel: Callable[[], bool] | None = None,
           time_budget_s: float | None = None) -> ABResult:
    """Time arms A and B of `base` (a bench_config.BenchConfig) interleaved in randomised blocks.

    `time_budget_s` (None: none) bounds the blocks' time: a block pair that would end past it, judged by the
    pair before it, is not started; the result says how many pairs ran (`out_of_time`) and the verdict is
    from those.

    Each block runs under its arm's own flags context, on a CUDA device on its arm's own thread (see
    ArmThreads), and starts
    with one discarded iteration plus one warm-up (a flag change such as the thread count needs a pass to
    settle). `on_block(arm, index, total,
    samples)` is called after each block; `should_cancel()` is checked between iterations. What the model's
    code changes in torch's global state is put back at the end and said in `state_notes`.
    """
    watch = StateWatch()  # before the model's code runs
    try:
        result = _run_ab(base, a, b, blocks, per_block, seed, on_block, should_cancel, watch, time_budget_s)
    finally:
        notes = watch.close()
    result.state_notes = list(notes)
    return result


def _run_ab(base, a: ArmSpec, b: ArmSpec, blocks: int, per_block: int, seed: int, on_block: OnBlock | None,
            should_cancel: Callable[[], bool] | None, watch: StateWatch, time_budget_s: float | None) -> ABResult:
    import torch

    from torchperf_tui.engine.input_spec import ShapeFeed
    from torchperf_tui.engine.inputs import parse_dtype
    from torchperf_tui.engine.shapes import parse_schedule
    from torchperf_tui.engine.timing import check_schedule_accepted, run_timed_loop
    from torchperf_tui.engine.train_step import StepRunner, grad_context
    from torchperf_tui.engine.workload import forward_errors, prepare_workload

    if blocks < MIN_PAIRS:
        raise TorchperfError(f"a comparison needs at least {MIN_PAIRS} blocks per arm, got {blocks} (with fewer "
                             "pairs the signed-rank test can never reach p < 0.05)")
    if per_block < 1:
        raise TorchperfError(f"samples per block must be at least 1, got {per_block}")
    started = time.time()
    steps = {"A": a.step_spec(base), "B": b.step_spec(base)}
    plan = base.prepare(amp_for=[(steps["A"], a.dtype or base.dtype), (steps["B"], b.dtype or base.dtype)])
    device, shape = plan.device, plan.shape
    cancelled = should_cancel or (lambda: False)
    arms = {}
    schedules = {}
    checked = set()  # (schedule, dtype) pairs already run through the model on meta
    for name, spec in (("A", a), ("B", b)):
        schedule = parse_schedule(spec.shapes or base.shapes, seed=seed)
        schedules[name] = schedule
        step = steps[name]
        arms[name] = ArmResult(spec=spec.text, flags=spec.flags, dtype=spec.dtype or base.dtype,
                               channels_last=base.channels_last if spec.channels_last is None else spec.channels_last,
                               blocks=[], shapes=schedule.describe(), step=step.step,
                               optimizer=step.optimizer if step.training else None, amp=step.amp,
                               threads_asked=asked_state(spec.flags).flags.num_threads)
        if schedule.varies and (schedule.describe(), arms[name].dtype) not in checked:
            check_schedule_accepted(base.model, schedule, shape, arms[name].dtype)
            checked.add((schedule.describe(), arms[name].dtype))
    workloads = {}
    for name, arm in arms.items():
        key = (arm.dtype, arm.channels_last)
        if key not in workloads:
            workloads[key] = prepare_workload(base.model, plan.inputs, device, parse_dtype(arm.dtype),
                                              arm.channels_last)
    watch.built()
    # A training step changes the weights (and batch norm's statistics): when either arm trains, every block
    # of either arm starts from the state the model was built in (a training arm with a fresh optimizer), so
    # neither arm trains on, or infers with, the other's steps.
    training = any(step.training for step in steps.values())
    initial = ({key: {k: v.detach().clone() for k, v in work.model.state_dict().items()}
                for key, work in workloads.items()} if training else {})
    # Each arm follows its own schedule across its blocks (the same seeded sequence for both arms, so a
    # random schedule shows them the same shapes in the same order); the block's settling iteration
    # runs the configured shape.
    feeds = {name: ShapeFeed(workloads[(arm.dtype, arm.channels_last)].x, shape,
                             schedules[name].shapes(shape, blocks * per_block), parse_dtype(arm.dtype), device,
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
        work = workloads[(arm.dtype, arm.channels_last)]
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
            model.load_state_dict(initial[(arm.dtype, arm.channels_last)])
        with applied_flags(arm.flags), grad_context(step), forward_errors(base.model, shape, work.dtype, device):
            runner = StepRunner(model, step, device, seed=seed)
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
            items = sum(shape[0] for shape in feeds[name].timed_shapes[:pairs * per_block])
            arm.conditions = sampler.summary([f"{name}{i}" for i in range(pairs)], items=items)
        # Each arm's spread over its own samples: pooled, the two arms' speeds would read as spread.
        arm.host_noise = host.summary(arm.samples_ms, spread=not schedules[name].varies)
    host_noise = host.summary([*arms["A"].samples_ms, *arms["B"].samples_ms]).host_only("said per arm")
    verdict = block_verdict(arms["A"].blocks, arms["B"].blocks, seed=seed) if pairs >= MIN_PAIRS else None
    notes = [AA_NOTE] if same_arms(base, a, b) else []
    notes += inert_arm_flags(base.flags, arms["A"].flags, arms["B"].flags, device.type)
    notes += step_notes(arms["A"], arms["B"])
    clocks = throttle_note(arms["A"].conditions, arms["B"].conditions)
    if clocks:
        notes.append(clocks)
    # The result's step and amp are what both arms did; where the arms differ they are said per arm.
    same = arms["A"].step == arms["B"].step and arms["A"].optimizer == arms["B"].optimizer
    return ABResult(model=base.model, device=str(device), input_shape=tuple(shape), a=arms["A"], b=arms["B"],
                    order=order, verdict=verdict, cancelled=stopped, duration_s=time.time() - started,
                    notes=notes, step=arms["A"].step if same else "mixed",
                    optimizer=arms["A"].optimizer if same else None,
                    amp=arms["A"].amp if arms["A"].amp == arms["B"].amp else "mixed", out_of_time=out_of_time,
                    host_noise=host_noise)


def inert_arm_flags(base: Flags, a: Flags, b: Flags, device: str) -> list[str]:
    """One line per flag the arms differ in that has no effect on `device`, naming the arm that set it away
    from the base run (so a flag arm A set is not blamed on B): a same-speed verdict is not that flag's."""
    from torchperf_tui.engine.flags import FLAG_SPECS, flag_applicability

    lines = []
    for spec in FLAG_SPECS:
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
