"""What `why` found (engine/analysis/advisor.py gathers it): ranked findings, each with its evidence, the time it puts
at stake per pass, the fix a user can paste, and, where the fix was run as an interleaved A/B, the measured gain
beside the estimate. Results that travel to the CLI's and the app's processes: no torch here."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from torchperf_tui.engine.hardware.host_noise import HostNoise, noise_marks
from torchperf_tui.engine.workloads.input_facts import InputFacts

CONFIRMED, REFUTED, INCONCLUSIVE, NOT_RUN = "confirmed", "refuted", "inconclusive", "not run"


def finding_name(finding: dict) -> str:
    """What tells findings apart across two records (a record keeps each as a dict): their kind, and the layer of one
    about a layer ('slow_layer:scale')."""
    return f"{finding.get('key')}:{finding['layer']}" if finding.get("layer") else str(finding.get("key"))


def findings_change(before: list[str], after: list[str]) -> str:
    """Two results' findings by name (finding_name): 'findings appeared: threads; went away: attention_math', 'the same
    findings', or 'no findings in either'."""
    appeared = [name for name in after if name not in before]
    went = [name for name in before if name not in after]
    if not appeared and not went:
        return "the same findings" if before else "no findings in either"
    parts = ([f"findings appeared: {', '.join(appeared)}"] if appeared else []) + (
        [f"went away: {', '.join(went)}"] if went else [])
    return "; ".join(parts)


@dataclass
class Finding:
    """One thing that costs the pass time, with what it rests on and what to do about it."""

    key: str  # what kind of finding: "attention_math", "threads", "slow_layer"
    what: str  # one sentence
    evidence: list[str]  # the figures it rests on, each naming the measurement it comes from
    at_stake_ms: float  # the estimated time per pass the fix would save
    pass_ms: float  # the pass it is a share of (the set-up as given, its timing's median)
    fix: str = ""  # the fix as an A/B arm's SPEC ('sdpa=all', 'threads=2'); '' when no option fixes it
    options: str = ""  # the same as command-line options to paste ('--sdpa all')
    changes_numerics: bool = False
    layer: str | None = None  # the layer a finding is about
    # The fix run as an interleaved A/B against the set-up as given (when verified):
    # confirmed (a significant gain), refuted (the interval holds no gain), inconclusive (neither: more blocks would
    # settle it) or not run
    verdict: str = NOT_RUN
    why_not_run: str | None = None  # no option fixes it; out of budget; not asked
    ratio: float | None = None  # B/A per block pair (below 1: the fix is faster)
    ci_low: float | None = None
    ci_high: float | None = None
    p_value: float | None = None
    a_median_ms: float | None = None  # the A/B's own arm A median: the measured gain's base

    @property
    def share(self) -> float:
        """The estimate's share of the pass, 0-1."""
        return self.at_stake_ms / self.pass_ms if self.pass_ms > 0 else 0.0

    @property
    def measured_ms(self) -> float | None:
        """The gain the A/B measured per pass: arm A's median times (1 - B/A); None before it ran."""
        if self.ratio is None or self.a_median_ms is None:
            return None
        return self.a_median_ms * (1.0 - self.ratio)

    @property
    def measured_interval_ms(self) -> tuple[float, float] | None:
        """The measured gain's 95 % interval, from the ratio's CI."""
        if None in (self.ci_low, self.ci_high, self.a_median_ms):
            return None
        return self.a_median_ms * (1.0 - self.ci_high), self.a_median_ms * (1.0 - self.ci_low)

    def rank(self) -> tuple[int, float]:
        """A finding's place, smallest first: the confirmed by their measured gain, then the rest by their estimate,
        the refuted last."""
        if self.verdict == CONFIRMED and self.measured_ms is not None:
            return 0, -self.measured_ms
        return (2 if self.verdict == REFUTED else 1), -self.at_stake_ms

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "share": self.share, "measured_ms": self.measured_ms,
                "measured_interval_ms": list(self.measured_interval_ms) if self.measured_interval_ms else None}


@dataclass
class Advice(InputFacts):
    """Why the set-up takes the time it takes: the findings above the threshold, ranked, and what was measured."""

    model: str
    device: str
    input_shape: tuple[int, ...]
    dtype: str
    flags_text: str
    pass_ms: float  # the set-up's timing: its median
    step: str  # what one of its iterations did: 'infer', or a training step as StepSpec.describe says it
    samples_ms: list[float]  # that timing's samples (the report's histogram)
    threshold_pct: float  # findings below this share of the pass are counted, not listed
    findings: list[Finding] = field(default_factory=list)  # ranked
    below: int = 0  # findings found under the threshold
    layers: list[tuple[str, float]] = field(default_factory=list)  # (layer, own ms per pass), slowest first
    # The report's roofline: (layer, FLOPs a byte of its inputs and outputs, FLOP/s it reached), for each layer with
    # FLOPs counted and a time measured; and the roofs kept for the device (its dtype's compute ceiling in FLOP/s, its
    # copy's bytes/s; None where none is kept).
    roofline: list[tuple[str, float, float]] = field(default_factory=list)
    roofs: tuple[float | None, float | None] = (None, None)
    measurements: list[str] = field(default_factory=list)  # what was measured, a line each, in order
    budget_s: float | None = None
    duration_s: float = 0.0
    cancelled: bool = False
    notes: list[str] = field(default_factory=list)
    host_noise: HostNoise | None = None  # the host over the set-up's timing
    app_marks: list[str] = field(default_factory=list)
    gpu_marks: list[str] = field(default_factory=list)  # the GPU's other processes over that timing
    config: Any = None  # the set-up (a BenchConfig), for its history record
    flags: Any = None  # its Flags, and the thread count its timing ran on (the record's flags)
    threads_used: int | None = None

    def disturbance_marks(self) -> list[str]:
        return [*self.app_marks, *noise_marks(self.host_noise), *self.gpu_marks]

    def to_dict(self) -> dict[str, Any]:
        data = {key: value for key, value in self.__dict__.items()
                if key not in ("findings", "config", "host_noise", "flags")}
        data["flags"] = self.flags.to_dict() if self.flags is not None else None
        data["findings"] = [finding.to_dict() for finding in self.findings]
        data["input_shape"] = list(self.input_shape)
        data["layers"] = [list(pair) for pair in self.layers]
        data["roofline"] = [list(point) for point in self.roofline]
        data["roofs"] = {"compute_flops": self.roofs[0], "copy_bytes_per_s": self.roofs[1]}
        data["host_noise"] = self.host_noise.to_dict() if self.host_noise is not None else None
        data["disturbance_marks"] = self.disturbance_marks()
        return data
