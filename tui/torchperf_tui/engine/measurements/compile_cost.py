"""torch.compile's cost in the open: the compile time (the first call of the compiled model, kept out of the
samples), what dynamo's counters say it did (frames compiled, graphs, graph breaks and their reasons, and the
recompiles after the first call), the eager model timed right after in the same process on the same input under
the same flags, and the break-even: after how many calls the compile time is paid back by the time each compiled
call saves, compile_s / (eager median - compiled median), never when the compiled model is not faster.

Dynamo's counters (torch._dynamo.utils.counters, a dict of Counters, the same keys in torch 2.11 and 2.14):
"frames"/"total" counts the frames dynamo compiled (each graph break resumes in a frame of its own; each
recompile compiles a frame again), "stats"/"unique_graphs" the graphs it made, and "graph_break" one entry per
reason with how often it was met. They are cleared with dynamo's caches before the compile (`torch._dynamo.reset`
does not clear them). A timed sample during which a frame was compiled holds a recompilation: it is counted
(`recompiled_samples`) and kept out of the run's statistics, as first-seen shapes are kept apart.

The break-even is a pure function and this module imports no torch at the top (the app reads its result type).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from torchperf_tui.core.errors import TorchperfError, first_line
from torchperf_tui.core.run_option_table import run_option

# torch.compile modes offered (the run option table's): "reduce-overhead" adds CUDA graphs on a GPU.
COMPILE_MODES = run_option("compile").choices


def break_even_calls(compile_s: float, eager_median_ms: float, compiled_median_ms: float) -> int | None:
    """After how many calls compiling has paid for itself: compile_s / (eager median - compiled median), rounded
    up; None (never) when the compiled model is not faster."""
    saved_ms = eager_median_ms - compiled_median_ms
    if not (saved_ms > 0) or not math.isfinite(saved_ms) or compile_s is None or compile_s < 0:
        return None
    return max(1, math.ceil(compile_s * 1000.0 / saved_ms))


@dataclass
class CompileCost:
    """What compiling cost and what it bought, beside a compiled run (TimingResult.compile_cost)."""

    compile_s: float | None
    frames: int | None = None  # frames dynamo compiled at the first call (1 + one per graph break)
    graphs: int | None = None  # the graphs it made by the end of the run
    graph_breaks: int | None = None  # graph breaks met at the first call
    break_reasons: list[str] = field(default_factory=list)  # their reasons, one line each
    recompiles: int | None = None  # frames compiled after the first call: warm-up and timed iterations
    recompiled_samples: int = 0  # timed samples that held a recompilation (kept out of the statistics)
    eager_median_ms: float | None = None
    compiled_median_ms: float | None = None
    eager_iters: int = 0
    eager_source: str = ""  # where the eager median comes from
    break_even_calls: int | None = None  # None: see break_even_note
    break_even_note: str = ""  # why there is no break-even: not faster, shapes vary, cancelled
    counters_note: str = ""  # dynamo's counters could not be read: why

    def to_dict(self) -> dict[str, Any]:
        from dataclasses import asdict

        return asdict(self)


def _counters():
    """torch._dynamo.utils.counters, or None where this torch has none."""
    try:
        from torch._dynamo.utils import counters
    except ImportError:
        return None
    return counters


def _count(counters, group: str, key: str) -> int:
    found = counters.get(group)
    return int(found.get(key, 0)) if found is not None else 0


def frames_compiled() -> int | None:
    counters = _counters()
    return _count(counters, "frames", "total") if counters is not None else None


class CompiledModel:
    """The callable to time and its compilation's bookkeeping: `forward` (the compiled model, or the eager one
    when compiling failed: `error`), `compile_s`, and the frame counts read between timed iterations."""

    def __init__(self, forward, compile_s: float | None = None, error: str | None = None) -> None:
        self.forward, self.compile_s, self.error = forward, compile_s, error
        self.first: dict[str, Any] = {}
        self._marks: list[int] = []  # frames compiled so far, before each timed iteration

    @property
    def compiled(self) -> bool:
        return self.compile_s is not None

    def before_timed(self) -> None:
        """Called before each timed iteration, outside the timer."""
        if self.compiled:
            self._marks.append(frames_compiled() or 0)

    def recompiled(self, samples: int) -> list[bool]:
        """Per timed sample: whether dynamo compiled a frame during it."""
        if not self.compiled or not self._marks:
            return [False] * samples
        marks = self._marks[:samples] + [frames_compiled() or 0]
        flags = [after > before for before, after in zip(marks, marks[1:])]
        return (flags + [False] * samples)[:samples]

    def cost(self, compiled_median_ms: float | None, eager_median_ms: float | None, eager_iters: int,
             recompiled_samples: int, no_eager: str = "") -> CompileCost | None:
        """The cost of this compile against the eager median (None for a run that did not compile)."""
        if not self.compiled:
            return None
        counters = _counters()
        cost = CompileCost(compile_s=self.compile_s, recompiled_samples=recompiled_samples,
                           compiled_median_ms=compiled_median_ms, eager_median_ms=eager_median_ms,
                           eager_iters=eager_iters)
        if counters is None:
            cost.counters_note = "this torch has no torch._dynamo.utils.counters"
        else:
            cost.frames, cost.graph_breaks = self.first["frames"], self.first["breaks"]
            cost.break_reasons = self.first["reasons"]
            cost.graphs = _count(counters, "stats", "unique_graphs")
            cost.recompiles = max(0, _count(counters, "frames", "total") - self.first["frames"])
        if eager_median_ms is None:
            cost.break_even_note = no_eager or "no eager run"
            return cost
        cost.eager_source = (f"the eager model, timed right after the compiled one in this process: same input, "
                             f"same flags, {eager_iters} iterations")
        cost.break_even_calls = break_even_calls(self.compile_s, eager_median_ms, compiled_median_ms)
        if cost.break_even_calls is None:
            cost.break_even_note = "never: the compiled model is not faster than eager"
        return cost


def compile_model(model, x, mode: str | None, device) -> CompiledModel:
    """The model to time. Compilation happens at the first call, so that call is timed here as the compile cost
    (dynamo's caches and counters cleared first: earlier runs' graphs must not count toward this one); a failing
    compile (no C++ compiler, an unsupported op) falls back to eager and says why instead of failing the run."""
    if mode is None:
        return CompiledModel(model)
    run_option("compile").choose(mode)
    import torch

    torch._dynamo.reset()
    counters = _counters()
    if counters is not None:
        counters.clear()
    t0 = time.perf_counter()
    try:
        compiled = torch.compile(model, mode=mode)
        x.call(compiled)
        if device.type == "cuda":
            torch.cuda.synchronize(device)
    except Exception as exc:  # any backend failure: report it, keep the eager numbers
        torch._dynamo.reset()
        return CompiledModel(model, error=f"torch.compile(mode={mode!r}) failed: {type(exc).__name__}: "
                                          f"{first_line(exc)}")
    out = CompiledModel(compiled, compile_s=time.perf_counter() - t0)
    if counters is not None:
        breaks = counters.get("graph_break") or {}
        out.first = {"frames": _count(counters, "frames", "total"), "breaks": int(sum(breaks.values())),
                     "reasons": [first_line(str(reason)) for reason in breaks]}
    return out


def time_eager(run_loop: Callable[..., Any], forward: Callable[[], object], *, warmup, iters: int,
                   budget_s: float | None, should_cancel) -> tuple[float | None, int]:
    """(median ms, iterations) of the eager model timed by `run_loop` (timing.run_timed_loop, given its device)
    with the compiled run's warm-up, iterations and budget; (None, 0) when cancelled before a sample."""
    import statistics

    times = run_loop(forward, warmup=warmup, iters=iters, should_cancel=should_cancel, budget_s=budget_s)
    if times.cancelled or not times.samples_ms:
        return None, 0
    return statistics.median(times.samples_ms), len(times.samples_ms)
