"""Generation under two arms (flags, dtype) interleaved, with a verdict on decode and the prefill said apart:
`compare MODEL --generate N --a SPEC --b SPEC`.

Each block is one greedy generation (engine/measurements/generation.py's loop, every step timed as there) under its
arm's flags, in A B / B A pairs drawn at random as every A/B here (engine/measurements/abtest.py's block_order). The
verdict is the A/B's own (engine/measurements/ab_result.py's block_verdict: paired block medians, a bootstrap CI and
a signed-rank test): on each block's per-token median for decode, the headline, and on each block's time to first
token for the prefill, apart, since a change (a kernel, a dtype) can speed one and not the other. Each arm's first
block is preceded by a warm-up generation, and every block by an untimed prefill (a flag change such as the thread
count needs a pass to settle). The arms run on the calling thread. The host is read over the interleaved blocks and
each arm's decode steps judged for their spread, as an A/B's (engine/hardware/host_noise.py): the result says so.
Each arm's first timed block counts the bytes a decode step reads in its dtype
(engine/measurements/decode_bandwidth.py), for the bandwidth its per-token median reached.

The result's module loads without torch (the UI process reads it).
"""

from __future__ import annotations

import contextlib
import statistics
import time
from dataclasses import asdict, dataclass, field, fields
from typing import Any, Callable

from torchperf_tui.engine.measurements.watched import watched
from torchperf_tui.engine.measurements.flags import applied_flags, asked_state, Flags, pristine_state
from torchperf_tui.core.errors import TorchperfError
from torchperf_tui.engine.hardware.host_noise import HostNoise, HostProbe, noise_marks
from torchperf_tui.engine.workloads.input_facts import InputFacts, PromptInput
from torchperf_tui.engine.hardware.lazy_torch import torch
from torchperf_tui.engine.measurements.ab_arms import same_arms
from torchperf_tui.engine.measurements.decode_bandwidth import DecodeBytes, bandwidth_gbs, parameter_bytes
from torchperf_tui.engine.measurements.generation import (STATIC_CACHE, GreedyLoop, cache_bytes, cache_positions,
                                                          check_generation, check_new_tokens, check_positions,
                                                          method_text, token_clock)
from torchperf_tui.engine.workloads.inputs import parse_dtype
from torchperf_tui.engine.workloads.workload import forward_errors, prepare_workload

DEFAULT_BLOCKS = 10  # block pairs; a verdict needs ab_result.MIN_PAIRS (6)


@dataclass
class GenerationArm:
    """One arm's generations, block by block: each block's time to first token and its decode steps."""

    spec: str
    flags: Flags
    dtype: str
    ttft_ms: list[float] = field(default_factory=list)
    decode_blocks: list[list[float]] = field(default_factory=list)
    threads_asked: int | None = None
    host_noise: HostNoise | None = None  # the host over the blocks (both arms alike), and this arm's decode spread
    decode_bytes: DecodeBytes | None = None  # what a decode step reads in this arm's dtype (its first timed block)
    quant: str | None = None  # the arm's model: its quantization scheme and attention implementation
    attn: str | None = None
    cache: str = "dynamic"  # its KV cache: "dynamic", or "static" with the decode step compiled

    @property
    def decode_ms(self) -> list[float]:
        return [ms for block in self.decode_blocks for ms in block]

    def ttft_median_ms(self) -> float | None:
        return statistics.median(self.ttft_ms) if self.ttft_ms else None

    def per_token_median_ms(self) -> float | None:
        samples = self.decode_ms
        return statistics.median(samples) if samples else None

    def bandwidth_gbs(self) -> float | None:
        """The bytes a decode step reads over this arm's per-token median, in GB/s."""
        return bandwidth_gbs(self.decode_bytes.per_step if self.decode_bytes is not None else None,
                             self.per_token_median_ms())

    def flags_text(self, device: str) -> str:
        return self.flags.describe(device, default_threads=self.threads_asked)


@dataclass
class GenerationABResult(InputFacts, PromptInput):
    model: str
    device: str
    batch: int
    prompt_len: int
    new_tokens: int
    a: GenerationArm
    b: GenerationArm
    order: list[str]
    decode_verdict: Any  # ab_result.Verdict on the blocks' per-token medians, or None (too few pairs)
    prefill_verdict: Any  # the same on the blocks' TTFT
    method: str
    timer: str
    cancelled: bool
    duration_s: float
    out_of_time: str | None = None
    notes: list[str] = field(default_factory=list)
    state_notes: list[str] = field(default_factory=list)
    # The host over the interleaved blocks (each arm's decode spread is on the arm), and what the app saw beside them.
    host_noise: HostNoise | None = None
    app_marks: list[str] = field(default_factory=list)

    @property
    def pairs(self) -> int:
        return min(len(self.a.ttft_ms), len(self.b.ttft_ms))

    def disturbance_marks(self) -> list[str]:
        """Every reason the verdicts may not be the arms' alone, one line each, as an A/B's: what the app saw, the
        host, then each arm's decode spread ('arm B: noisy samples: ...')."""
        arms = [f"arm {name}: {line}" for name, arm in (("A", self.a), ("B", self.b))
                if arm.host_noise is not None for line in arm.host_noise.sample_warnings()]
        return [*self.app_marks, *noise_marks(self.host_noise), *arms]

    def summary(self) -> str:
        """The headline: the decode verdict (per output token), or why there is none."""
        # numpy: the app loads this module's results without it
        from torchperf_tui.engine.measurements.ab_result import no_verdict_text

        if self.decode_verdict is None:
            return no_verdict_text(self.pairs, self.cancelled, self.out_of_time)
        return f"decode (per output token): {self.decode_verdict.summary()}"

    def to_dict(self) -> dict:
        data = {f.name: getattr(self, f.name) for f in fields(self)}
        for name in ("a", "b"):
            arm = getattr(self, name)
            data[name] = {**asdict(arm), "flags": arm.flags.to_dict(), "ttft_median_ms": arm.ttft_median_ms(),
                          "per_token_median_ms": arm.per_token_median_ms(), "bandwidth_gbs": arm.bandwidth_gbs(),
                          "bytes_per_step": arm.decode_bytes.per_step if arm.decode_bytes is not None else None,
                          "host_noise": arm.host_noise.to_dict() if arm.host_noise is not None else None}
        for name in ("decode_verdict", "prefill_verdict"):
            verdict = getattr(self, name)
            data[name] = verdict.to_dict() if verdict is not None else None
        data["input_shape"] = list(self.input_shape)
        data["summary"] = self.summary()
        data["host_noise"] = self.host_noise.to_dict() if self.host_noise is not None else None
        data["disturbance_marks"] = self.disturbance_marks()
        return data


def check_arm(arm) -> None:
    """An arm of a generation A/B sets flags, the dtype, the quantization, the attention implementation and the KV
    cache; the run settings a generation does not take, refused."""
    for key in ("shapes", "step", "optimizer", "amp", "channels_last", "compile"):
        if getattr(arm, key, None) is not None:
            raise TorchperfError(f"{key}= in {arm.text!r}: a generation A/B compares flags, dtype, quant, attn and "
                                 "cache (generation is greedy inference on one prompt; cache=static compiles its "
                                 "decode step)")


def run_generation_ab(base, a, b, new_tokens: int, *, blocks: int = DEFAULT_BLOCKS, seed: int = 0,
                      should_cancel: Callable[[], bool] | None = None, time_budget_s: float | None = None,
                      on_block: Callable[[str, int, int], None] | None = None) -> GenerationABResult:
    """Arms `a` and `b` (ab_arms.ArmSpec) of `base` (its prompt the input), `blocks` generations each, interleaved.
    `on_block(arm, index, total)` after each block; `should_cancel()` between steps; a block pair that would end
    past `time_budget_s` (judged by the pair before it) is not started."""
    check_new_tokens(new_tokens)
    return watched(lambda watch: _run(base, a, b, new_tokens, blocks, seed, should_cancel, time_budget_s, on_block, watch))


def _run(base, a, b, new_tokens, blocks, seed, should_cancel, time_budget_s, on_block, watch) -> GenerationABResult:
    # numpy: the app loads this module's results without it
    from torchperf_tui.engine.measurements.ab_result import MIN_PAIRS, block_verdict
    # numpy: the app loads this module's results without it
    from torchperf_tui.engine.measurements.abtest import AA_NOTE, block_order, inert_arm_flags
    if blocks < MIN_PAIRS:
        raise TorchperfError(f"a comparison needs at least {MIN_PAIRS} blocks per arm, got {blocks}")
    started = time.time()

    def checks(device, step) -> None:
        check_generation(base, new_tokens)
        check_arm(a)
        check_arm(b)

    plan = base.prepare(before_amp=checks, arms=(a, b), generates=True)
    device, inputs = plan.device, plan.inputs
    check_positions(inputs, new_tokens)
    runs = {"A": a.run_of(base), "B": b.run_of(base)}
    arms = {name: GenerationArm(spec=spec.text, flags=spec.flags, dtype=runs[name].dtype,
                                threads_asked=asked_state(spec.flags).flags.num_threads, quant=runs[name].quant,
                                attn=runs[name].attn, cache=runs[name].cache)
            for name, spec in (("A", a), ("B", b))}
    for arm in arms.values():
        parse_dtype(arm.dtype)  # an unknown dtype is one line before anything is built
    workloads = {}  # arms alike in their model (BenchConfig.model_key) share one
    for run in runs.values():
        if run.model_key() not in workloads:
            workloads[run.model_key()] = prepare_workload(base.model, inputs, device, parse_dtype(run.dtype),
                                                          seed=seed, model_args=base.model_args, quant=run.quant,
                                                          attn=run.attn)
    watch.built()
    loops: dict[str, GreedyLoop] = {}  # each arm's, kept over its blocks (a static cache's compiled step with it)
    sample = token_clock(device)
    cancelled = should_cancel or (lambda: False)
    order = block_order(blocks, seed)
    warmed: set[str] = set()
    stopped, out_of_time = False, None
    on_device = torch.cuda.device(device) if device.type == "cuda" else contextlib.nullcontext()

    def run_block(name: str) -> tuple[float, list[float]] | None:
        arm, work = arms[name], workloads[runs[name].model_key()]
        with applied_flags(arm.flags), torch.inference_mode(), on_device, \
                forward_errors(base.model, inputs.shape, work.dtype, device, action="generating"):
            if name not in loops:
                loops[name] = GreedyLoop(work.model, work.x, new_tokens, arm.cache)
            loop = loops[name]
            if name not in warmed:  # the arm's first block: a whole warm-up generation
                loop.prefill()
                for step in range(1, new_tokens):
                    loop.decode(step)
                warmed.add(name)
            loop.prefill()  # settles the arm's flags (a thread count needs a pass)
            if cancelled():
                return None
            host.begin()
            ttft = sample(loop.prefill)
            decode, kv_steps = [], []
            for step in range(1, new_tokens):
                if cancelled():
                    return None
                decode.append(sample(lambda: loop.decode(step)))
                if arm.decode_bytes is None:  # outside the timed step: the cache it returned is the one it read
                    kv_steps.append((cache_bytes(loop.cache), cache_positions(loop.cache)))
            host.end()
            if arm.decode_bytes is None:
                arm.decode_bytes = DecodeBytes.of_steps(parameter_bytes(work.model), kv_steps)
            watch.ran(arm.flags, during=f"arm {name}'s blocks")
        return ttft, decode

    host = HostProbe(during="the blocks")  # read at the edges of each block's timed steps
    try:
        timed_from = pair_started = time.perf_counter()
        last_pair_s = 0.0
        for index, name in enumerate(order):
            if index % 2 == 0:
                now = time.perf_counter()
                if index:
                    last_pair_s = now - pair_started
                pair_started = now
                if time_budget_s is not None and index and now - timed_from + last_pair_s > time_budget_s:
                    out_of_time = f"time budget {time_budget_s:g} s reached after {index // 2} of {blocks} block pairs"
                    break
            block = run_block(name)
            if block is None:
                stopped = True
                break
            arms[name].ttft_ms.append(block[0])
            arms[name].decode_blocks.append(block[1])
            if on_block is not None:
                on_block(name, index, len(order))
    finally:
        loops.clear()  # their caches and compiled steps go with the models
        for work in workloads.values():
            work.release()
    pairs = min(len(arms["A"].ttft_ms), len(arms["B"].ttft_ms))
    for arm in arms.values():  # only complete pairs count
        arm.ttft_ms, arm.decode_blocks = arm.ttft_ms[:pairs], arm.decode_blocks[:pairs]
    for arm in arms.values():  # the same host figures on both, each arm's own decode spread
        arm.host_noise = host.summary(arm.decode_ms)
    host_noise = host.summary([*arms["A"].decode_ms, *arms["B"].decode_ms]).host_only("said per arm")
    decode_verdict = prefill_verdict = None
    if pairs >= MIN_PAIRS:
        decode_verdict = block_verdict(arms["A"].decode_blocks, arms["B"].decode_blocks, seed=seed)
        prefill_verdict = block_verdict([[ms] for ms in arms["A"].ttft_ms], [[ms] for ms in arms["B"].ttft_ms],
                                        seed=seed)
    notes = [AA_NOTE] if same_arms(base, a, b, default_threads=pristine_state().flags.num_threads) else []
    notes += inert_arm_flags(base.flags, arms["A"].flags, arms["B"].flags, device.type)
    return GenerationABResult(
        **base.input_facts(inputs), model=base.model, device=str(device), batch=inputs.batch,
        prompt_len=inputs.seq_len, new_tokens=new_tokens, a=arms["A"], b=arms["B"], order=order,
        decode_verdict=decode_verdict, prefill_verdict=prefill_verdict,
        method=method_text(new_tokens, inputs.seq_len) + "; one generation per block" + "".join(
            f"; arm {name}: {STATIC_CACHE} (in its warm-up)" for name, arm in arms.items()
            if arm.cache == "static"),
        timer="cuda-events" if device.type == "cuda" else "perf_counter", cancelled=stopped,
        duration_s=time.time() - started, out_of_time=out_of_time, notes=notes, host_noise=host_noise)
