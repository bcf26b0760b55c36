"""What an A/B comparison found: each arm's samples block by block, and the verdict on B against A.

The verdict works on paired block medians: the ratio is the median over pairs of B_i / A_i (block i of B against
its neighbour block i of A, so drift the two share cancels), with a bootstrap 95 % CI of that median and a
Wilcoxon signed-rank test on the paired log-ratios. A difference is called real only when both agree (p < alpha
and the CI excludes 1). (A ratio of the two arms' overall medians would carry the block-to-block drift into the
CI and miss real differences on a busy machine.) How the blocks are run is engine/measurements/abtest.py's.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Any

import numpy as np

from torchperf_tui.engine.workloads.input_facts import InputFacts
from torchperf_tui.core.errors import TorchperfError
from torchperf_tui.engine.measurements.flags import Flags
from torchperf_tui.engine.hardware.gpu_tenants import tenant_marks
from torchperf_tui.engine.hardware.host_noise import HostNoise
from torchperf_tui.engine.hardware.run_conditions import RunConditions

ALPHA = 0.05
# Block pairs a verdict (and an arm's CI) needs; a cancelled comparison may have fewer. Six, not five: with 5
# pairs the exact two-sided signed-rank test's smallest p is 2/32 = 0.0625, so it could never call a difference
# (seen on an H100: B/A 0.70 with a CI of 0.69-0.71 read "no significant difference"); with 6 it is 0.031.
MIN_PAIRS = 6
CONFIDENCE = 0.95


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
    # The run this arm was (a BenchConfig: the comparison's base with the arm's settings), kept by its history record.
    config: Any = None
    quantized: Any = None  # what the scheme converted and left (engine/workloads/quantization.QuantReport)
    drift: Any = None  # an arm that changes numerics: its outputs against the float32 model's (drift.Drift)
    compile_s: float | None = None  # a compiled arm: its compile (the first call), before its blocks, not in them
    compile_error: str | None = None  # why its compile failed (the arm then ran eager)

    @property
    def quant(self) -> str | None:
        """Its quantization scheme (its run's)."""
        return getattr(self.config, "quant", None)

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


def no_verdict_text(pairs: int, cancelled: bool, out_of_time: str | None) -> str:
    """Why an interleaved comparison (of passes or of generations) has no verdict, in one line."""
    why = f"cancelled after {pairs} block pair(s)" if cancelled else out_of_time or "too few blocks"
    return f"no verdict: {why} (a verdict needs {MIN_PAIRS})"


@dataclass
class ABResult(InputFacts):
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
    # What the model's code changed in torch's global state during the comparison, put back (engine.measurements.flags).
    state_notes: list[str] = field(default_factory=list)
    out_of_time: str | None = None  # the time budget stopped the blocks short: how far they got, in words
    # The host over the interleaved blocks (load, other processes' CPU; each arm's spread is on the arm), and what
    # the app saw happen beside them (a resize, heavy redraws), set by the UI process when the result reaches it.
    # Both end up in the two arms' history records' `disturbed`.
    host_noise: HostNoise | None = None
    app_marks: list[str] = field(default_factory=list)
    # Where an arm changes numerics: B's outputs against A's on the same input and weights (drift.Drift).
    drift_b: Any = None
    # A quantization scheme against none: its prediction per Linear (engine/analysis/quant_prediction.py), and the
    # B/A it predicts from the unquantized arm's median, beside the measured one.
    prediction: Any = None
    predicted_ratio: float | None = None

    def disturbance_marks(self) -> list[str]:
        """Every reason the comparison's numbers may not be the arms' alone, one line each: what the app saw, the
        host, then each arm's samples ('arm B: noisy samples: p50 is 3.1x the fastest sample')."""
        host = self.host_noise.warnings() if self.host_noise is not None else []
        arms = [f"arm {name}: {line}" for name, arm in (("A", self.a), ("B", self.b))
                if getattr(arm, "host_noise", None) is not None for line in arm.host_noise.sample_warnings()]
        gpu = [f"arm {name}: {line}" for name, arm in (("A", self.a), ("B", self.b))
               for line in tenant_marks(getattr(arm, "conditions", None))]
        return [*self.app_marks, *host, *arms, *gpu]

    @property
    def pairs(self) -> int:
        return min(len(self.a.blocks), len(self.b.blocks))

    def summary(self) -> str:
        if self.verdict is None:
            return no_verdict_text(self.pairs, self.cancelled, self.out_of_time)
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
            data[arm] = {**{k: v for k, v in asdict(arm_result).items() if k != "config"},  # its fields are said
                         "flags": arm_result.flags.to_dict(), "quant": arm_result.quant,
                         "compile": getattr(arm_result.config, "compile", None),
                         "conditions": arm_result.conditions.to_dict() if arm_result.conditions else None,
                         "host_noise": noise.to_dict() if noise is not None else None}
        data["input_shape"] = list(self.input_shape)
        data["host_noise"] = self.host_noise.to_dict() if self.host_noise is not None else None
        data["disturbance_marks"] = self.disturbance_marks()
        data["verdict"] = self.verdict.to_dict() if self.verdict else None
        data["drift_b"] = self.drift_b.to_dict() if self.drift_b is not None else None
        data["prediction"] = self.prediction.to_dict() if self.prediction is not None else None
        data["summary"] = self.summary()
        return data
