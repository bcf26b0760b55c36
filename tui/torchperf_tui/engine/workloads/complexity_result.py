"""A model's complexity as plain data (parameters, size, FLOPs, the per-layer table): the UI process shows it
without importing torch; engine/workloads/complexity.py, which counts it on the meta device, needs torch."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from torchperf_tui.engine.workloads.input_facts import InputFacts

MB = 1024 * 1024  # size_mb is in MiB, as torchsummary/torchstat and `du -m` report it


@dataclass
class LayerStat:
    """One row of the per-layer table.

    flops are the module's own: a leaf module's whole count, or for a container the part done in its
    own forward outside its children (e.g. Swin's functional window attention). So the rows sum to the
    model's total. Shapes are of the first tensor in and out; output_bytes counts every output tensor.
    """

    name: str
    type: str
    input_shape: tuple[int, ...]
    output_shape: tuple[int, ...]
    params: int
    flops: int
    output_bytes: int
    calls: int = 1
    backward_flops: int | None = None  # a training step's backward in this module (None: not counted)


@dataclass
class AttentionCount:
    """The forward's torch.nn.functional.scaled_dot_product_attention calls, as counted.

    `flops` (part of Complexity.flops, each call's QK^T and AV: 2*B*heads*L*S*(E + Ev)) count every one of the
    L x S scores, as SDPA's math kernel computes them (the one that runs on meta; the efficient and cuDNN kernels
    do the same work), also for causal calls: a flash kernel skips the masked half of a causal call's scores, so
    about half of those FLOPs. A training step's backward counts the full scores too (2x the forward's).
    """

    calls: int
    flops: int
    causal_calls: int = 0  # is_causal=True
    masked_calls: int = 0  # with an attn_mask (its values cannot be read on meta; counted as if nothing is masked)


@dataclass
class Complexity(InputFacts):
    model: str
    input_shape: tuple[int, ...]
    dtype: str
    params_total: int
    params_trainable: int
    size_bytes: int
    size_mb: float
    flops: int
    macs: int
    layers: list[LayerStat] = field(default_factory=list)  # per layer: the forward pass
    step: str = "infer"  # "train": a training step was counted, its backward in backward_flops
    backward_flops: int | None = None  # the backward pass of a training step (flops and macs: the forward)
    attention: AttentionCount | None = None  # the forward's SDPA calls (None: none ran)

    @property
    def step_flops(self) -> int:
        """FLOPs of one iteration: the forward, plus the backward for a training step (the optimizer's
        elementwise update is not counted)."""
        return self.flops + (self.backward_flops or 0)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

