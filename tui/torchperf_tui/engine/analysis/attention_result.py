"""What one attention call site ran under arm A and arm B (engine/analysis/attention_kernels.py finds it): results
that travel to the app's UI process, so this module imports no torch."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass
class AttentionRun:
    """What one arm's attention ran at a site in one pass, beside what was allowed."""

    allowed: str  # the SDPA set, 'all' or 'flash+math'
    ran: str  # flash, efficient, cudnn, math; '' when nothing was recorded
    kernels: list = field(default_factory=list)  # KernelTime: the GPU kernels, or on the CPU the ATen op
    us_per_iter: float = 0.0
    calls_per_iter: float = 0.0
    passed_over: dict[str, str] = field(default_factory=dict)  # an allowed backend that could not -> why


@dataclass
class AttentionSite:
    """One attention call site (a module) in one pass (fwd, or a training step's bwd) under arm A and arm B."""

    site: str
    phase: str
    a: AttentionRun
    b: AttentionRun

    @property
    def changed(self) -> bool:
        return self.a.ran != self.b.ran

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "changed": self.changed}
