"""What a run feeds its model, as an object: today one float tensor of a shape (batch first), drawn from a
seeded normal distribution. Every runner makes its inputs here (`InputSpec.make`), so a kind of input that is
not one float tensor has one place to go.

Needs no torch to import (the app's UI process builds configs); `make` imports it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

from torchperf_tui.engine.workloads.inputs import make_input

if TYPE_CHECKING:
    import torch

OnShape = Callable[[int, tuple, bool], None]  # (timed index, input shape, first time this shape was met)


@dataclass(frozen=True)
class InputSpec:
    """The input of one pass: a tensor of `shape`, whose first dimension is the batch."""

    shape: tuple[int, ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "shape", tuple(self.shape))

    @property
    def batch(self) -> int:
        return self.shape[0]

    @property
    def sample_shape(self) -> tuple[int, ...]:
        """One item of the batch: the shape without its batch dimension."""
        return self.shape[1:]

    @property
    def rank(self) -> int:
        return len(self.shape)

    def at_batch(self, batch: int) -> InputSpec:
        """The same input at another batch."""
        return InputSpec((batch, *self.sample_shape))

    def make(self, device: "torch.device | str" = "cpu", dtype: "torch.dtype | None" = None,
             channels_last: bool = False, seed: int = 0) -> "torch.Tensor":
        """The input on `device` in `dtype`: deterministic for a seed (engine.workloads.inputs.make_input)."""
        return make_input(self.shape, dtype=dtype, device=device, channels_last=channels_last, seed=seed)

    def make_meta(self, dtype: "torch.dtype") -> "torch.Tensor":
        """The input's stand-in on the meta device (shapes, no memory), for the analysis that runs the model there."""
        import torch

        return torch.empty(self.shape, dtype=dtype, device="meta")


class ShapeFeed:
    """The input of the timed iterations under a shape schedule; remembers which shapes were met."""

    def __init__(self, x: "torch.Tensor", shape: tuple[int, ...], timed_shapes: list[tuple[int, ...]],
                 dtype: "torch.dtype", device: "torch.device", channels_last: bool, seed: int,
                 on_shape: OnShape | None) -> None:
        self.x, self.shape = x, tuple(shape)
        self.timed_shapes = timed_shapes
        self.dtype, self.device, self.channels_last, self.seed = dtype, device, channels_last, seed
        self.seen = {self.shape}  # the first iteration and the warm-up ran the configured shape
        self.first_seen: list[bool] = []
        self.on_shape = on_shape
        self.passes_started = 0  # counted outside the timer, to tell a rejected input from a failing model

    def passes_done(self) -> int:
        """Passes completed before the one in flight; 0 when that one is the first at a new shape."""
        if self.first_seen and self.first_seen[-1]:
            return 0
        return max(0, self.passes_started - 1)

    def advance(self, index: int) -> None:
        shape = self.timed_shapes[index]
        first = shape not in self.seen
        self.seen.add(shape)
        self.first_seen.append(first)
        if shape != self.shape:
            self.x = None  # free the old input before making the new one
            self.x = InputSpec(shape).make(self.device, self.dtype, self.channels_last, seed=self.seed + index)
            self.shape = shape
        if self.on_shape is not None:
            self.on_shape(index, shape, first)
