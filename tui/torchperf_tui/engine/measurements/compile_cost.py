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

Cold and warm start (the first call with an empty compile cache, and again in a second process with it filled):
the run compiles in a fresh cache folder (compile_cache.py) and a second process compiles the same model at the same
input from it (warm_compile.py), each in a process whose compiler was readied before the clock (ready_compiler).
Each first call is split into the phases torch's own timers measured (`torch._dynamo.utils.get_compilation_metrics()`,
one record per frame compiled, the "dynamo_compile" metrics). Those timers nest (the frame's compile holds the
backend's, which holds inductor's, which holds its code generation), so each phase is one timer less the one inside
it: dynamo = `_compile.compile_inner` (dynamo_cumulative_compile_time) - `OutputGraph.call_user_compiler`
(aot_autograd_cumulative_compile_time); AOT autograd = that - `compile_fx_inner` (inductor_cumulative_compile_time);
inductor = that - `GraphLowering.compile_to_module` (inductor_code_gen_cumulative_compile_time), which is code
generation with the compile of its kernels. Autotuning (compile_time_autotune_time, and Triton's at the first run on
a GPU, runtime_triton_autotune_time) happens inside those and is said beside them, never added. What none of torch's
timers covers (the compiled code's first run, guards) is the rest. Older torch gives the same four timers as
*_time_s fields; one without them gives the times without phases.

The break-even and the phases' arithmetic are pure functions and this module imports no torch at the top (the app
reads its result types).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field, fields
from typing import Any, Callable

from torchperf_tui.core.errors import TorchperfError, first_line
from torchperf_tui.core.run_option_table import run_option
from torchperf_tui.engine.measurements.compile_cache import CompileCache

# torch.compile modes offered (the run option table's): "reduce-overhead" adds CUDA graphs on a GPU.
COMPILE_MODES = run_option("compile").choices


def break_even_calls(compile_s: float, eager_median_ms: float, compiled_median_ms: float) -> int | None:
    """After how many calls compiling has paid for itself: compile_s / (eager median - compiled median), rounded
    up; None (never) when the compiled model is not faster."""
    saved_ms = eager_median_ms - compiled_median_ms
    if not (saved_ms > 0) or not math.isfinite(saved_ms) or compile_s is None or compile_s < 0:
        return None
    return max(1, math.ceil(compile_s * 1000.0 / saved_ms))


# Torch's per-frame compile record (CompilationMetrics): its four nested timers, each by its field in microseconds
# (torch >= 2.6) and by the older one in seconds: the frame's compile (dynamo's, holding the rest), the backend's
# (AOT autograd, holding inductor), inductor's (holding its code generation) and code generation's.
NESTED_TIMERS = (("dynamo_cumulative_compile_time_us", "entire_frame_compile_time_s"),
                 ("aot_autograd_cumulative_compile_time_us", "backend_compile_time_s"),
                 ("inductor_cumulative_compile_time_us", "inductor_compile_time_s"),
                 ("inductor_code_gen_cumulative_compile_time_us", "code_gen_time_s"))
# Autotuning, inside the phases (inductor's choice among kernels as it compiles) or the first run (Triton's, on a GPU).
AUTOTUNE_TIMERS = ("compile_time_autotune_time_us", "runtime_triton_autotune_time_us")
# Its counts of the on-disk caches' look-ups: inductor's FX graph cache and AOT autograd's.
CACHE_COUNTS = (("fx_graph_hits", "inductor_fx_local_cache_hit_count"),
                ("fx_graph_misses", "inductor_fx_local_cache_miss_count"),
                ("aot_hits", "aotautograd_local_cache_hit_count"), ("aot_misses", "aotautograd_local_cache_miss_count"))


@dataclass
class CompilePhases:
    """One first call of a compiled model: its time (`wall_s`, timed here) and where torch's own timers say it went,
    each phase one nested timer less the one inside it (this module's docstring). None: torch did not say."""

    wall_s: float
    dynamo_s: float | None = None  # tracing the Python bytecode into graphs, guards
    aot_s: float | None = None  # AOT autograd: functionalisation, decompositions, its cache's look-up and load
    inductor_s: float | None = None  # inductor's passes, lowering and scheduling, before code generation
    codegen_s: float | None = None  # code generation and the compile of its kernels (C++ or Triton)
    autotune_s: float | None = None  # autotuning, inside the phases above (or the first run): not added to them
    rest_s: float | None = None  # the first call outside torch's timers: the compiled code's first run, guards
    frames: int = 0  # the frame compiles torch recorded (one per frame: a graph break adds one)
    ready_s: float = 0.0  # before the clock, readying the process's compiler (compile_cost.ready_compiler; 0: was)
    fx_graph_hits: int | None = None  # inductor's FX graph cache, on disk: graphs found, and not found
    fx_graph_misses: int | None = None
    aot_hits: int | None = None  # AOT autograd's cache, on disk
    aot_misses: int | None = None
    note: str = ""  # why there are no phases

    @property
    def misses(self) -> int:
        """The graphs neither cache had (a warm start that missed compiled them again)."""
        return (self.fx_graph_misses or 0) + (self.aot_misses or 0)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "CompilePhases":
        """Read back from the JSON a second process wrote (its fields, nothing else)."""
        known = {f.name for f in fields(cls)}
        return cls(**{name: value for name, value in data.items() if name in known})


def _seconds(record: Any, us_name: str, s_name: str | None = None) -> float | None:
    value = getattr(record, us_name, None)
    if isinstance(value, (int, float)):
        return value / 1e6
    value = getattr(record, s_name, None) if s_name else None
    return float(value) if isinstance(value, (int, float)) else None


def _sum(values: list[Any]) -> Any:
    known = [value for value in values if isinstance(value, (int, float))]
    return sum(known) if known else None


def phases_of(records: list[Any], wall_s: float) -> CompilePhases:
    """The phases of a first call that took `wall_s`, from torch's compile records made during it (CompilationMetrics,
    or anything with their fields), summed over its frames; none, and a note, where no record has the timers."""
    frame, backend, inductor, codegen = (_sum([_seconds(record, *names) for record in records])
                                         for names in NESTED_TIMERS)
    phases = CompilePhases(wall_s=wall_s,
                           frames=sum(1 for record in records if _seconds(record, *NESTED_TIMERS[0]) is not None))
    for name, column in CACHE_COUNTS:
        setattr(phases, name, _sum([getattr(record, column, None) for record in records]))
    if frame is None:
        phases.note = ("this torch records no compile timers" if not records else
                       "torch's compile records carry no timers")
        return phases
    # A timer that did not run (inductor on a cache hit) holds nothing; one never exceeds the timer holding it, and
    # a rounding that says otherwise is no negative phase.
    outer = [frame, backend or 0.0, inductor or 0.0, codegen or 0.0]
    inner = outer[1:] + [0.0]
    phases.dynamo_s, phases.aot_s, phases.inductor_s, phases.codegen_s = (max(0.0, o - i) for o, i in zip(outer, inner))
    phases.autotune_s = _sum([_seconds(record, name) for record in records for name in AUTOTUNE_TIMERS])
    phases.rest_s = max(0.0, wall_s - frame)
    return phases


def compile_records() -> list[Any] | None:
    """Torch's compile records (torch._dynamo.utils.get_compilation_metrics: one per frame compiled since they were
    last cleared, the latest 64), or None where this torch keeps none."""
    try:
        from torch._dynamo.utils import get_compilation_metrics
    except ImportError:
        return None
    return list(get_compilation_metrics())


def clear_compile_records() -> None:
    try:
        from torch._dynamo.utils import clear_compilation_metrics
    except ImportError:
        return
    clear_compilation_metrics()


_READY: set[str] = set()  # the device types this process's compiler is ready for (ready_compiler)


def ready_compiler(device) -> float:
    """Before the clock starts, what a process pays once, at its first compile on a kind of device, whatever it
    compiles: importing torch's compiler, the key its caches are filed under (a hash of torch's own files), its pool
    of compile workers (started, and waited for), and what inductor sets up at its first graph (its pattern
    matchers, the CPU's vector instruction sets, each tried with a compile of its own): a small throwaway function is
    compiled, in a throwaway cache. Seconds on a small box: paid in the compile, they would make the first compiled
    run of a measurement process slower than the next, and the warm start in its new process slower than it is.
    Returns the seconds it took (0 when this process was ready already): what a new process adds to any start."""
    if device.type in _READY:
        return 0.0
    import torch

    started = time.perf_counter()
    try:
        from torch._inductor.async_compile import AsyncCompile
        from torch._inductor.codecache import torch_key
    except ImportError:  # a torch without them pays them in the compile, as it must
        AsyncCompile = torch_key = None
    if torch_key is not None:
        torch_key()
    try:
        getattr(AsyncCompile, "wait_pool_ready", lambda timeout: None)(timeout=120)
    except Exception:  # noqa: BLE001 - workers that do not start leave inductor compiling in this process
        pass
    with CompileCache("default") as throwaway, throwaway.in_use():
        try:
            torch.compile(_throwaway)(torch.ones(4, 4, device=device))
        except Exception:  # noqa: BLE001 - the model's own compile says what fails, in its place
            pass
        torch._dynamo.reset()
    _READY.add(device.type)
    return time.perf_counter() - started


def _throwaway(x):
    return (x * 2.0 + 1.0).relu().sum(dim=-1)


@dataclass
class CompileCost:
    """What compiling cost and what it bought, beside a compiled run (TimingResult.compile_cost): `compile_s` is the
    cold start (an empty cache), `cold` its phases, `warm` the warm start's (a second process, the cache filled)."""

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
    break_even_calls: int | None = None  # against the cold start; None: see break_even_note
    break_even_note: str = ""  # why there is no break-even: not faster, shapes vary, cancelled
    counters_note: str = ""  # dynamo's counters could not be read: why
    cold: CompilePhases | None = None  # the first call with an empty cache, in this process
    warm: CompilePhases | None = None  # the first call in a second process, from the cache the cold start filled
    warm_note: str = ""  # why there is no warm start (skipped, cancelled, failed), or what is odd in it
    break_even_warm_calls: int | None = None  # against the warm start; None: see break_even_note

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
        self.phases: CompilePhases | None = None  # where the first call's time went, as torch's timers say
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
             recompiled_samples: int, no_eager: str = "", warm: CompilePhases | None = None,
             warm_note: str = "") -> CompileCost | None:
        """The cost of this compile (the cold start) and of the `warm` start (or why there is none: `warm_note`)
        against the eager median (None for a run that did not compile)."""
        if not self.compiled:
            return None
        counters = _counters()
        cost = CompileCost(compile_s=self.compile_s, recompiled_samples=recompiled_samples,
                           compiled_median_ms=compiled_median_ms, eager_median_ms=eager_median_ms,
                           eager_iters=eager_iters, cold=self.phases, warm=warm, warm_note=warm_note)
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
        if warm is not None:
            cost.break_even_warm_calls = break_even_calls(warm.wall_s, eager_median_ms, compiled_median_ms)
        if cost.break_even_calls is None:
            cost.break_even_note = "never: the compiled model is not faster than eager"
        return cost


def compile_model(model, x, mode: str | None, device) -> CompiledModel:
    """The model to time. Compilation happens at the first call, so that call is timed here as the compile cost,
    with the phases torch's timers give it (dynamo's caches, its counters and torch's compile records cleared first:
    earlier runs' graphs must not count toward this one; whether inductor's caches hold anything is the caller's:
    compile_cache.py); a failing compile (no C++ compiler, an unsupported op) falls back to eager and says why
    instead of failing the run."""
    if mode is None:
        return CompiledModel(model)
    run_option("compile").choose(mode)
    import torch

    ready_s = ready_compiler(device)
    torch._dynamo.reset()
    counters = _counters()
    if counters is not None:
        counters.clear()
    clear_compile_records()
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
    records = compile_records()
    out.phases = phases_of(records or [], out.compile_s)
    out.phases.ready_s = ready_s
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
