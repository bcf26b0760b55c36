"""What a run feeds its model, as an object, and the one place inputs are made.

An `InputSpec` names the model's inputs: a main tensor whose shape the user sets (batch first: an image's
(N, C, H, W), a token model's (N, sequence length)), how it is made (`TensorSpec.kind`: float values, token
ids below the vocabulary size, an attention mask of ones, zeros), under which keyword it goes (None: the first
positional argument), and the other tensors the model takes beside it (masks, decoder ids, fixed-size
features). Or a user factory's `example_inputs(batch, device, dtype)` makes them (`factory`). `make` turns it
into a `ModelInputs` (the positional and keyword arguments of one call), deterministic for a seed.

Needs no torch to import (the app's UI process builds configs); `make` imports it.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Callable, Iterable

from torchperf_tui.core.formatting import format_shape
from torchperf_tui.engine.workloads.model_inputs import ModelInputs
from torchperf_tui.engine.workloads.inputs import check_input_fits, make_input
from torchperf_tui.core.errors import ShapeError
from torchperf_tui.engine.workloads.example_inputs import call_example_inputs

if TYPE_CHECKING:
    import torch

OnShape = Callable[[int, tuple, bool], None]  # (timed index, input shape, first time this shape was met)

# How a tensor is made: "float" values drawn from a seeded normal distribution in the run's dtype; "tokens" int64
# ids drawn uniformly below `high` (a vocabulary size); "mask" int64 ones (an attention mask with nothing padded);
# "zeros" int64 zeros (token type ids of one segment).
TENSOR_KINDS = ("float", "tokens", "mask", "zeros")


@dataclass(frozen=True)
class TensorSpec:
    """One tensor a model takes. `dims` is its shape without the batch, None for the main input's own."""

    name: str | None = None  # the keyword it is passed as; None: positional, in order
    kind: str = "float"
    dims: tuple[int, ...] | None = None
    high: int | None = None  # "tokens": ids are drawn from [0, high)

    def __post_init__(self) -> None:
        if self.kind not in TENSOR_KINDS:
            raise ValueError(f"unknown tensor kind {self.kind!r}")
        if self.dims is not None:
            object.__setattr__(self, "dims", tuple(self.dims))

    @property
    def integer(self) -> bool:
        return self.kind != "float"

    def label(self, shape: tuple[int, ...]) -> str:
        """'input_ids 1x128 int64 (ids < 50257)', 'x 1x3x224x224': the name (or its place), shape and what it holds."""
        text = f"{self.name or 'input'} {format_shape(shape)}"
        if self.kind == "tokens":
            return f"{text} int64 (ids < {self.high:,})" if self.high else f"{text} int64"
        if self.kind == "mask":
            return f"{text} int64 (all ones)"
        if self.kind == "zeros":
            return f"{text} int64 (zeros)"
        return text


@dataclass(frozen=True)
class InputSpec:
    """The inputs of one pass. `shape` is the main input's, batch first; `extra` the tensors beside it (their
    `dims` None: the main input's shape); `factory` a user's `module:factory` whose `example_inputs` makes them."""

    shape: tuple[int, ...]
    main: TensorSpec = field(default_factory=TensorSpec)
    extra: tuple[TensorSpec, ...] = ()
    factory: str | None = None
    # A token model's maximum positions, and the setting of its config that says so ("max_position_embeddings").
    max_len: int | None = None
    max_len_key: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "shape", tuple(self.shape))
        object.__setattr__(self, "extra", tuple(self.extra))

    def check_shape(self, shape: tuple[int, ...]) -> None:
        """ShapeError when the main input cannot take `shape`: token ids longer than the model's maximum positions."""
        if self.tokens and self.max_len is not None and shape[-1] > self.max_len:

            where = f" ({self.max_len_key})" if self.max_len_key else ""
            raise ShapeError(f"sequence length {shape[-1]} is past the model's maximum of {self.max_len} "
                             f"positions{where}")

    @property
    def batch(self) -> int:
        return self.shape[0]

    @property
    def sample_shape(self) -> tuple[int, ...]:
        """One item of the batch: the main input's shape without its batch dimension."""
        return self.shape[1:]

    @property
    def rank(self) -> int:
        return len(self.shape)

    @property
    def tokens(self) -> bool:
        """The main input is token ids: its last dimension is the sequence length."""
        return self.main.kind == "tokens"

    @property
    def seq_len(self) -> int | None:
        return self.shape[-1] if self.tokens else None

    @property
    def simple(self) -> bool:
        """One float tensor as the only positional argument: the input of every torchvision model."""
        return self.main == TensorSpec() and not self.extra and self.factory is None

    def with_shape(self, shape: tuple[int, ...]) -> InputSpec:
        """The same inputs with the main one at another shape (extras that follow it follow)."""
        return replace(self, shape=tuple(shape))

    def at_batch(self, batch: int) -> InputSpec:
        """The same inputs at another batch."""
        return self.with_shape((batch, *self.sample_shape))

    def shapes(self) -> list[tuple[TensorSpec, tuple[int, ...]]]:
        """Each tensor made here with its full shape, the main one first."""
        return [(self.main, self.shape)] + [(t, (self.batch, *(t.dims if t.dims is not None else self.sample_shape)))
                                            for t in self.extra]

    def describe(self) -> str:
        """What the model is fed, for a result's heading: '1x3x224x224', or each tensor by name with its shape."""
        if self.factory is not None:
            return f"{self.factory}'s example_inputs at batch {self.batch}"
        if self.simple:
            return format_shape(self.shape)
        return ", ".join(t.label(s) for t, s in self.shapes())

    def make(self, device: "torch.device | str" = "cpu", dtype: "torch.dtype | None" = None,
             channels_last: bool = False, seed: int = 0) -> "ModelInputs":
        """The inputs on `device`, floating ones in `dtype` (token ids and masks stay int64): deterministic for a
        seed."""
        if self.factory is not None:
            return call_example_inputs(self.factory, self.batch, device, dtype)
        made = [(t, _make_tensor(t, shape, device, dtype, channels_last, seed + n))
                for n, (t, shape) in enumerate(self.shapes())]
        return ModelInputs.of(made)

    def make_meta(self, dtype: "torch.dtype") -> "ModelInputs":
        """The inputs' stand-ins on the meta device (shapes, no memory), for the analysis that runs the model there."""
        import torch

        if self.factory is not None:
            real = call_example_inputs(self.factory, self.batch, "cpu", dtype)
            return real.map(lambda t: torch.empty(t.shape, dtype=t.dtype, device="meta"))
        made = [(t, torch.empty(shape, dtype=torch.int64 if t.integer else dtype, device="meta"))
                for t, shape in self.shapes()]
        return ModelInputs.of(made)


def _make_tensor(spec: TensorSpec, shape: tuple[int, ...], device, dtype, channels_last: bool, seed: int):
    import torch

    if spec.kind == "float":
        return make_input(shape, dtype=dtype, device=device, channels_last=channels_last, seed=seed)
    check_input_fits(shape, torch.int64, device)
    if spec.kind == "tokens":
        gen = torch.Generator().manual_seed(seed)
        return torch.randint(0, max(1, spec.high or 2), shape, generator=gen, dtype=torch.int64).to(device)
    fill = torch.ones if spec.kind == "mask" else torch.zeros
    return fill(shape, dtype=torch.int64, device=device)


class ShapeFeed:
    """The inputs of the timed iterations under a shape schedule, drawn from `timed_shapes` (a schedule's stream: one
    shape per timed iteration, as it comes); remembers the shapes it fed (`fed`), which were met first, and the bytes
    of the inputs it fed (`bytes_per_pass`)."""

    def __init__(self, x: ModelInputs, spec: InputSpec, timed_shapes: Iterable[tuple[int, ...]],
                 dtype: "torch.dtype", device: "torch.device", channels_last: bool, seed: int,
                 on_shape: OnShape | None) -> None:
        self.x, self.spec = x, spec
        self.shape = spec.shape
        self.timed_shapes = iter(timed_shapes)
        self.fed: list[tuple[int, ...]] = []  # the shape of each timed iteration so far, in order
        self.dtype, self.device, self.channels_last, self.seed = dtype, device, channels_last, seed
        self.seen = {self.shape}  # the first iteration and the warm-up ran the configured shape
        self.first_seen: list[bool] = []
        self.on_shape = on_shape
        self.passes_started = 0  # counted outside the timer, to tell a rejected input from a failing model
        self.nbytes = x.nbytes()  # of the inputs now
        self.bytes_fed = 0  # over the timed iterations so far

    @property
    def bytes_per_pass(self) -> int:
        """The bytes of one timed iteration's inputs: the mean over those fed (a varying schedule's shapes differ),
        the configured shape's before any."""
        return round(self.bytes_fed / len(self.fed)) if self.fed else self.nbytes

    def passes_done(self) -> int:
        """Passes completed before the one in flight; 0 when that one is the first at a new shape."""
        if self.first_seen and self.first_seen[-1]:
            return 0
        return max(0, self.passes_started - 1)

    def advance(self, index: int) -> None:
        """The next timed iteration's inputs (`index`: its number, which seeds its values)."""
        shape = next(self.timed_shapes)
        self.fed.append(shape)
        first = shape not in self.seen
        self.seen.add(shape)
        self.first_seen.append(first)
        if shape != self.shape:
            self.x = None  # free the old inputs before making the new ones
            self.x = self.spec.with_shape(shape).make(self.device, self.dtype, self.channels_last,
                                                      seed=self.seed + index)
            self.shape = shape
            self.nbytes = self.x.nbytes()
        self.bytes_fed += self.nbytes
        if self.on_shape is not None:
            self.on_shape(index, shape, first)
