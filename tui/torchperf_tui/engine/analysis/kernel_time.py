"""One kernel of a layer or an attention call (or on the CPU the ATen op), per profiled iteration: what the kernels
view lists under each arm. No torch: the app unpickles it with the result."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class KernelTime:
    """One kernel (or CPU implementation op) of a layer, per profiled iteration."""

    name: str
    us_per_iter: float
    calls_per_iter: float
    phase: str = "fwd"  # fwd, or for a training step's backward dgrad, wgrad or bwd
