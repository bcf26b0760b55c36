"""Input-shape schedules, and what a run learns from them: which iterations met a shape for the first time.

`cudnn.benchmark=True` autotunes the convolution algorithms again for every new input shape, so it wins
when shapes are fixed and can lose when they vary; oneDNN on the CPU also builds its primitives per
shape. A run with one fixed shape can only ever show the winning half of that story, so a run can follow
a schedule instead:

    fixed              the configured shape every iteration (the default)
    cycle:K            K spatial sizes around the configured one, repeated in order (cycle:K:LO-HI sets them)
    random[:LO-HI]     a new spatial size drawn each iteration, seeded (without a range: around the
                       configured size; random:LO-HI:batch=B1-B2 varies the batch too)

Only the timed iterations follow the schedule; the first iteration and the warm-up use the configured
shape, so the timed samples show each new shape's first-call cost. The tuning cost of a run is, per
shape first met in the timed iterations, that iteration minus the median of its repeats, summed. (The
configured shape's first iteration also holds one-off costs such as lazy CUDA loading, and is reported
apart as the run's first iteration.)
"""

from __future__ import annotations

import itertools
import random
import re
from dataclasses import asdict, dataclass, field
from typing import Iterable, Iterator

import numpy as np

from torchperf_tui.core.formatting import format_shape
from torchperf_tui.core.errors import ShapeError
from torchperf_tui.core.options import MAX_DIM

# cycle:K without a range spreads its sizes over this span around the configured size (224 -> 192..288).
CYCLE_SPAN = (6 / 7, 9 / 7)
SIZE_STEP = 8  # cycle sizes are multiples of 8, as real pipelines resize to


@dataclass(frozen=True)
class ShapeSchedule:
    """How the input shape changes from one timed iteration to the next."""

    kind: str = "fixed"
    count: int = 1  # cycle: how many sizes
    low: int | None = None  # cycle/random: the spatial size range (None: around the configured size)
    high: int | None = None
    batch_low: int | None = None  # random: the batch range (None: the configured batch)
    batch_high: int | None = None
    seed: int = 0

    @property
    def varies(self) -> bool:
        return self.kind != "fixed"

    def describe(self) -> str:
        if self.kind == "fixed":
            return "fixed"
        size = f"{self.low}-{self.high}" if self.low is not None else ""
        if self.kind == "cycle":
            return f"cycle:{self.count}" + (f":{size}" if size else "")
        batch = f":batch={self.batch_low}-{self.batch_high}" if self.batch_low is not None else ""
        return f"random:{size}{batch}" if size else "random"

    def sizes(self, base: tuple[int, ...]) -> list[int]:
        """The spatial sizes a cycle goes through (in order) for a configured shape `base`."""
        low, high = self._range(base)
        if self.count == 1:
            return [low] if self.low is not None else [_spatial(base)]
        raw = np.linspace(low, high, self.count)
        lowest, highest = -(-low // SIZE_STEP) * SIZE_STEP, high // SIZE_STEP * SIZE_STEP  # inside the range
        sizes = sorted({min(highest, max(lowest, int(round(v / SIZE_STEP)) * SIZE_STEP)) for v in raw})
        if len(sizes) < self.count:  # a range too narrow for multiples of 8: plain integers
            sizes = sorted({int(round(v)) for v in raw})
        return sizes

    def _range(self, base: tuple[int, ...]) -> tuple[int, int]:
        if self.low is not None and self.high is not None:
            return self.low, self.high
        size = _spatial(base)
        return max(1, int(round(size * CYCLE_SPAN[0]))), int(round(size * CYCLE_SPAN[1]))

    def stream(self, base: tuple[int, ...], sequence: bool = False) -> Iterator[tuple[int, ...]]:
        """The input shape of each timed iteration in turn, drawn as they are asked for and without end: a run takes
        one per iteration it runs, so a million asked iterations cost nothing up front. `sequence`: the input is
        token ids (batch, length), and the size that varies is the sequence length. A base without a spatial size
        is refused here, before the first shape is asked for."""
        check_spatial(base, self, sequence)
        return self._shapes(tuple(base), sequence)

    def _shapes(self, base: tuple[int, ...], sequence: bool) -> Iterator[tuple[int, ...]]:
        if self.kind == "fixed":
            yield from itertools.repeat(base)
        elif self.kind == "cycle":
            for size in itertools.cycle(self.sizes(base)):
                yield with_size(base, size, sequence)
        else:
            rng = random.Random(self.seed)
            low, high = self._range(base)
            while True:
                size = rng.randint(low, high)
                batch = rng.randint(self.batch_low, self.batch_high) if self.batch_low is not None else base[0]
                yield with_size((batch, *base[1:]), size, sequence)

    def extremes(self, base: tuple[int, ...], sequence: bool = False) -> list[tuple[int, ...]]:
        """The smallest and largest shapes the schedule can produce: what a model must accept."""
        if self.kind == "fixed":
            return [tuple(base)]
        if self.kind == "cycle":
            sizes = self.sizes(base)
            return sorted({with_size(base, sizes[0], sequence), with_size(base, sizes[-1], sequence)})
        low, high = self._range(base)
        b_low = self.batch_low if self.batch_low is not None else base[0]
        b_high = self.batch_high if self.batch_high is not None else base[0]
        return sorted({with_size((b_low, *base[1:]), low, sequence), with_size((b_high, *base[1:]), high, sequence)})


def _spatial(base: tuple[int, ...]) -> int:
    return int(base[-1])


def spatial_dims(rank: int, sequence: bool = False) -> int:
    """How many trailing dimensions a schedule varies: H and W of an image (or a video), L of a sequence of
    features (N, C, L), the length of token ids (N, L) (`sequence`)."""
    if sequence:
        return 1 if rank >= 2 else 0
    return min(2, rank - 2)


def check_spatial(base: tuple[int, ...], schedule: ShapeSchedule, sequence: bool = False) -> None:
    if schedule.varies and spatial_dims(len(base), sequence) < 1:
        shape = format_shape(base)
        raise ShapeError(f"shape schedule {schedule.describe()} varies the spatial size, but input {shape} has "
                         "none (it needs a batch, a channel and at least one more dimension)")


def with_size(base: tuple[int, ...], size: int, sequence: bool = False) -> tuple[int, ...]:
    dims = spatial_dims(len(base), sequence)
    return (*base[:len(base) - dims], *([size] * dims))


def _range_arg(text: str, what: str) -> tuple[int, int]:
    match = re.fullmatch(r"\s*(\d+)\s*-\s*(\d+)\s*", text)
    if not match:
        raise ShapeError(f"{what} {text!r}: write it as LO-HI, e.g. 192-288")
    low, high = int(match.group(1)), int(match.group(2))
    if low < 1 or high < low:
        raise ShapeError(f"{what} {text!r}: needs 1 <= LO <= HI")
    if high > MAX_DIM:  # no tensor has such a dimension: torch would fail deep inside, mid-run
        raise ShapeError(f"{what} {text!r}: HI must be at most {MAX_DIM:,}")
    return low, high


def parse_schedule(text: str | None, seed: int = 0) -> ShapeSchedule:
    """'fixed', 'cycle:4', 'cycle:4:192-288', 'random', 'random:192-288' or 'random:192-288:batch=1-8'; None is
    'fixed', an empty text is refused."""
    usage = "use fixed, cycle:K, cycle:K:LO-HI, random, random:LO-HI or random:LO-HI:batch=B1-B2"
    if text is not None and not text.strip():  # '' typed: a schedule left out by mistake, not 'fixed'
        raise ShapeError(f"empty shape schedule: {usage}")
    text = (text or "fixed").strip().lower()
    kind, _, rest = text.partition(":")
    parts = rest.split(":") if rest else []
    if kind == "fixed" and not parts:
        return ShapeSchedule(seed=seed)
    if kind == "cycle" and 1 <= len(parts) <= 2:
        try:
            count = int(parts[0])
        except ValueError:
            raise ShapeError(f"shape schedule {text!r}: K must be a whole number; {usage}") from None
        if not 1 <= count <= 64:
            raise ShapeError(f"shape schedule {text!r}: K must be between 1 and 64")
        low, high = _range_arg(parts[1], "cycle range") if len(parts) == 2 else (None, None)
        if low is not None and high - low + 1 < count:
            raise ShapeError(f"shape schedule {text!r}: {count} sizes do not fit in {low}-{high}")
        return ShapeSchedule(kind="cycle", count=count, low=low, high=high, seed=seed)
    if kind == "random" and not parts:
        return ShapeSchedule(kind="random", seed=seed)
    if kind == "random" and 1 <= len(parts) <= 2:
        low, high = _range_arg(parts[0], "random size range")
        batch_low = batch_high = None
        if len(parts) == 2:
            key, sep, value = parts[1].partition("=")
            if key.strip() != "batch" or not sep:
                raise ShapeError(f"shape schedule {text!r}: the optional part is batch=B1-B2")
            batch_low, batch_high = _range_arg(value, "batch range")
        return ShapeSchedule(kind="random", low=low, high=high, batch_low=batch_low, batch_high=batch_high,
                             seed=seed)
    raise ShapeError(f"unknown shape schedule {text!r}: {usage}")


@dataclass(frozen=True)
class ShapeCost:
    """One shape's first iteration against its repeats."""

    shape: tuple[int, ...]
    first_ms: float
    repeat_median_ms: float | None  # None: the shape never came back, so its first-call cost is unknown
    repeats: int  # its later iterations, warm-up included
    first_timed: bool = True  # first met in a timed iteration (False: the configured shape)

    @property
    def cost_ms(self) -> float | None:
        return None if self.repeat_median_ms is None else self.first_ms - self.repeat_median_ms


@dataclass
class ShapeReport:
    """What the schedule did in a run: first-seen iterations apart from repeats, and the tuning cost."""

    schedule: str
    distinct: int
    first_seen: int  # timed iterations that met their shape for the first time
    repeats: int
    first_seen_median_ms: float | None
    repeat_median_ms: float | None
    tuning_cost_ms: float  # over timed-first shapes that came back: their first iteration minus their repeats
    unrepeated: int  # timed-first shapes seen once only: their cost cannot be told apart from their size
    per_shape: list[ShapeCost] = field(default_factory=list)

    def summary(self) -> str:
        text = (f"{self.schedule}: {self.distinct} shape(s), {self.first_seen} first-seen timed iteration(s), "
                f"tuning cost {self.tuning_cost_ms:.1f} ms")
        if self.unrepeated:
            text += f" ({self.unrepeated} shape(s) never repeated, not counted)"
        return text

    def to_dict(self) -> dict:
        data = asdict(self)
        for row in data["per_shape"]:
            row["shape"] = list(row["shape"])
        data["summary"] = self.summary()
        return data


def shape_report(schedule: ShapeSchedule, iterations: Iterable[tuple[tuple[int, ...], float]],
                 timed_first_seen: list[bool]) -> ShapeReport:
    """`iterations`: (shape, ms) of every iteration in order (first, warm-up, timed); `timed_first_seen`:
    whether each timed iteration met its shape for the first time."""
    iterations = list(iterations)
    untimed = len(iterations) - len(timed_first_seen)
    by_shape: dict[tuple[int, ...], list[float]] = {}
    first_index: dict[tuple[int, ...], int] = {}
    for index, (shape, ms) in enumerate(iterations):
        by_shape.setdefault(tuple(shape), []).append(ms)
        first_index.setdefault(tuple(shape), index)
    per_shape = []
    for shape, times in by_shape.items():
        repeat = float(np.median(times[1:])) if len(times) > 1 else None
        per_shape.append(ShapeCost(shape=shape, first_ms=times[0], repeat_median_ms=repeat, repeats=len(times) - 1,
                                   first_timed=first_index[shape] >= untimed))
    timed = iterations[untimed:]
    first = [ms for (_, ms), seen in zip(timed, timed_first_seen) if seen]
    again = [ms for (_, ms), seen in zip(timed, timed_first_seen) if not seen]
    return ShapeReport(
        schedule=schedule.describe(),
        distinct=len(by_shape),
        first_seen=len(first),
        repeats=len(again),
        first_seen_median_ms=float(np.median(first)) if first else None,
        repeat_median_ms=float(np.median(again)) if again else None,
        tuning_cost_ms=float(sum(c.cost_ms for c in per_shape if c.first_timed and c.cost_ms is not None)),
        unrepeated=sum(1 for c in per_shape if c.first_timed and c.repeat_median_ms is None),
        per_shape=per_shape,
    )
