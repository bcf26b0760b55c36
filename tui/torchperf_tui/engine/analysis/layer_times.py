"""Where the time of one pass goes: each module's own time, the time outside every module, and on a GPU how
much of the pass the GPU was busy.

Every module's forward is wrapped (engine/workloads/layer_ranges.py) in a profiler range, so ranges nest as the modules do, and each
profiled iteration a range of its own. A module's *own* time is what happens in its range outside the ranges
of the modules it calls:
- on the CPU, the wall time of its range minus that of the nested ranges (its ops, and the Python between
  them);
- on a GPU, the duration of the kernels launched by the ops in its range outside the nested ranges (the
  device time, which is what the model costs when the GPU is the bottleneck).
For a training step each module also gets its backward: the autograd nodes built for the forward ops in its
own range (matched by autograd sequence number, as the kernels view does), their wall time on the CPU or
their kernels on a GPU. What no module owns is said in its own rows: the loss, the backward nodes of ops
outside any module and the gradient accumulation, the optimizer step, and the rest of the iteration (Python
between the calls, and the profiler's own records).

The pass itself is the mean wall time of the profiled iterations (each ends after the device synchronised),
so on the CPU the rows add up to the pass exactly. On a GPU the rows are kernel time: what they leave is the
time the GPU sat idle, waiting for Python to launch the next kernel ("GPU idle 58 % of the pass"). Busy time
is the union of the device's kernel, copy and set intervals within each iteration.

An inference pass on the CPU needs no profiler: each module's wrapped forward reads perf_counter itself, which
costs well under a microsecond a module, where the profiler's records of every op added some 7 % to a
ResNet-18 pass. A
training step needs the profiler for its backward (the autograd sequence numbers), a GPU for its kernels.
Profiled passes run slower than timed ones (every op is recorded); the result keeps the measured pass's
wall time so a caller can set it beside an unprofiled median.

The host is read over the passes as over a timed run (engine/hardware/host_noise.py): a busy host shows in every
row, and the result says so as a run does (`disturbance_marks`).
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from torchperf_tui.engine.measurements.bench_config import BenchConfig
from torchperf_tui.engine.workloads.input_facts import InputFacts
from torchperf_tui.core.errors import TorchperfError
from torchperf_tui.engine.measurements.flags import applied_flags
from torchperf_tui.engine.hardware.host_noise import HostNoise, HostProbe, noise_marks
from torchperf_tui.engine.workloads.layer_ranges import (BACKWARD_PREFIX, ITERATION_LABEL, LAYER_PREFIX, attach_layer_ranges,
                                               descendants, on_cpu, profile_iterations, wrap_forwards)
from torchperf_tui.engine.hardware.lazy_torch import torch
from torchperf_tui.engine.hardware.nvml import to_jsonable
from torchperf_tui.engine.workloads.workload import forward_errors, model_name, prepare_workload
from torchperf_tui.engine.measurements.train_step import StepRunner, grad_context

DEFAULT_ITERS = 5
DEFAULT_WARMUP = 3
DURING = "the passes timed per layer"  # the host's window, in its warning's words
LAUNCH_BOUND_IDLE_PCT = 50.0  # a GPU idle this much of the pass is waiting for the CPU to launch work
CPU_METHOD = ("CPU wall time of each module's profiler range minus the ranges of the modules it calls, mean of "
              "{n} profiled passes")
CPU_CLOCK_METHOD = ("CPU wall time of each module's forward (perf_counter around it, no profiler) minus the "
                    "modules it calls, mean of {n} passes")
CUDA_METHOD = ("GPU time of the kernels each module's own ops launched (CUPTI), mean of {n} profiled passes; "
               "GPU idle: the pass's wall time the device had no kernel, copy or set running")


@dataclass
class ModuleTime:
    """One module's own time per iteration, in ms (see the module docstring for 'own')."""

    name: str  # qualified; "" is the model itself
    type: str
    leaf: bool  # calls no other module
    forward_ms: float
    backward_ms: float = 0.0  # a training step's backward of the forward ops in its own range
    calls: float = 0.0  # forward calls per iteration (a module used twice, like ResNet's relu, runs twice)
    kernels: float = 0.0  # on a GPU: kernels launched per iteration, forward and backward

    @property
    def ms(self) -> float:
        return self.forward_ms + self.backward_ms


@dataclass
class GpuBusy:
    """How much of the profiled pass the GPU had work, and what that work was like."""

    busy_ms: float
    wall_ms: float
    kernels: float  # per iteration
    median_kernel_us: float

    @property
    def idle_pct(self) -> float:
        return max(0.0, 100.0 * (1.0 - self.busy_ms / self.wall_ms)) if self.wall_ms > 0 else 0.0

    def short(self) -> str:
        """'GPU idle 58 % of the pass: launch-bound' or 'GPU busy 93 % of the pass'."""
        if self.idle_pct >= LAUNCH_BOUND_IDLE_PCT:
            return f"GPU idle {self.idle_pct:.0f} % of the pass: launch-bound"
        return f"GPU busy {100 - self.idle_pct:.0f} % of the pass"

    def summary(self) -> str:
        """The short verdict, with the kernel count and size, and what would help a launch-bound pass."""
        counts = f"{self.kernels:.0f} kernels per pass, median {self.median_kernel_us:.1f} µs"
        if self.idle_pct >= LAUNCH_BOUND_IDLE_PCT:
            return (f"{self.short()}, the GPU waits for Python to launch the next kernel ({counts}); CUDA graphs "
                    "or a larger batch would help")
        return f"{self.short()} ({counts})"

    def to_dict(self) -> dict[str, Any]:
        return {**to_jsonable(self), "idle_pct": self.idle_pct, "summary": self.summary()}


@dataclass
class LayerTimes(InputFacts):
    """The time of one profiled pass, module by module, and what no module owns."""

    model: str
    device: str
    input_shape: tuple[int, ...]
    step: str  # "infer", or a training step as StepSpec.describe says it
    iters: int  # passes profiled
    pass_ms: float  # mean wall time of a profiled pass (synchronised)
    modules: list[ModuleTime]  # in the order they first ran
    # What no module owns, per iteration in ms: "loss", "backward outside the modules", "optimizer step", and
    # "rest of the iteration" (CPU: the wall time left; GPU: kernels launched outside every module).
    outside: dict[str, float] = field(default_factory=dict)
    gpu: GpuBusy | None = None  # None on the CPU
    kind: str = "cpu"  # "cpu" (wall time) or "cuda" (kernel time)
    method: str = ""
    cancelled: bool = False
    # The host over the passes (engine/hardware/host_noise.py), and what the app saw beside them (a resize, heavy
    # redraws), set by the UI process when the result reaches it.
    host_noise: HostNoise | None = None
    app_marks: list[str] = field(default_factory=list)

    def disturbance_marks(self) -> list[str]:
        """Every reason the times may not be the model's alone, one line each: what the app saw, then the host."""
        return [*self.app_marks, *noise_marks(self.host_noise)]

    def by_name(self) -> dict[str, ModuleTime]:
        return {m.name: m for m in self.modules}

    @property
    def modules_ms(self) -> float:
        return sum(m.ms for m in self.modules)

    @property
    def accounted_ms(self) -> float:
        """What the rows add up to: every module and every outside row."""
        return self.modules_ms + sum(self.outside.values())

    def to_dict(self) -> dict[str, Any]:
        data = to_jsonable({k: v for k, v in self.__dict__.items() if k not in ("modules", "gpu", "host_noise")})
        data["modules"] = [{**to_jsonable(m), "ms": m.ms} for m in self.modules]
        data["gpu"] = self.gpu.to_dict() if self.gpu is not None else None
        data["input_shape"] = list(self.input_shape)
        data["host_noise"] = self.host_noise.to_dict() if self.host_noise is not None else None
        data["disturbance_marks"] = self.disturbance_marks()
        return data


def _wall_us(event: Any) -> float:
    return float(event.time_range.end - event.time_range.start)


def _kernel_us(event: Any) -> tuple[float, int]:
    """(microseconds, count) of the device kernels launched by `event` and everything under it."""
    us, count = 0.0, 0
    for op in [event, *descendants(event)]:
        for kernel in getattr(op, "kernels", []) or []:
            if not str(kernel.name).startswith("torchperf-tui/"):
                us += float(kernel.duration)
                count += 1
    return us, count


class _Tally:
    """Sums over the profiled iterations, per module and per outside row."""

    def __init__(self, on_cuda: bool) -> None:
        self.on_cuda = on_cuda
        self.forward: dict[str, float] = {}
        self.backward: dict[str, float] = {}
        self.calls: dict[str, int] = {}
        self.kernels: dict[str, int] = {}
        self.outside: dict[str, float] = {}
        self.owner: dict[tuple[Any, int], str] = {}  # (forward thread, autograd sequence number) -> module

    def add_outside(self, row: str, us: float) -> None:
        self.outside[row] = self.outside.get(row, 0.0) + us

    def cost(self, event: Any) -> tuple[float, int]:
        """(its time, its kernels): wall time on the CPU, kernel time on a GPU."""
        return _kernel_us(event) if self.on_cuda else (_wall_us(event), 0)

    def module_range(self, event: Any) -> float:
        """Walk one module's range: its own time (and its nested modules'); returns its wall time."""
        name = str(event.name)[len(LAYER_PREFIX):]
        nested_wall, own_us, own_kernels = 0.0, 0.0, 0
        for child in getattr(event, "cpu_children", []) or []:
            if str(child.name).startswith(LAYER_PREFIX):
                nested_wall += self.module_range(child)
                continue
            for op in [child, *descendants(child)]:
                sequence = getattr(op, "sequence_nr", -1)
                if sequence is not None and sequence >= 0:
                    self.owner[(getattr(op, "thread", None), sequence)] = name
            if self.on_cuda:
                us, count = _kernel_us(child)
                own_us += us
                own_kernels += count
        wall = _wall_us(event)
        if not self.on_cuda:
            own_us = max(0.0, wall - nested_wall)
        self.forward[name] = self.forward.get(name, 0.0) + own_us
        self.calls[name] = self.calls.get(name, 0) + 1
        self.kernels[name] = self.kernels.get(name, 0) + own_kernels
        return wall

    def iteration(self, event: Any) -> None:
        """The iteration's own ops: the model's range, the loss, the optimizer step, the rest."""
        spent = 0.0
        for child in getattr(event, "cpu_children", []) or []:
            name = str(child.name)
            if name.startswith(LAYER_PREFIX):
                wall = self.module_range(child)
                spent += wall
            elif name.startswith(BACKWARD_PREFIX):
                continue  # counted with every backward node (on a GPU they run on a thread of their own)
            else:
                us, _count = self.cost(child)
                row = ("optimizer step" if name.startswith("Optimizer.") else
                       "backward outside the modules" if name.startswith("autograd::") else "loss")
                self.add_outside(row, us)
                spent += _wall_us(child)
        if not self.on_cuda:
            backward_wall = sum(_wall_us(c) for c in getattr(event, "cpu_children", []) or []
                                if str(c.name).startswith(BACKWARD_PREFIX))
            self.add_outside("rest of the iteration", max(0.0, _wall_us(event) - spent - backward_wall))

    def backward_node(self, event: Any) -> None:
        us, count = self.cost(event)
        module = self.owner.get((getattr(event, "fwd_thread", None), getattr(event, "sequence_nr", -1)))
        if module is None:
            self.add_outside("backward outside the modules", us)
        else:
            self.backward[module] = self.backward.get(module, 0.0) + us
            self.kernels[module] = self.kernels.get(module, 0) + count


def _busy(iterations: list[Any], device_events: list[Any]) -> GpuBusy:
    """The union of device intervals within each iteration, against the iterations' wall time."""
    busy, walls, durations = 0.0, 0.0, []
    spans = sorted(((e.time_range.start, e.time_range.end) for e in device_events), key=lambda s: s[0])
    for it in iterations:
        start, end = it.time_range.start, it.time_range.end
        walls += end - start
        covered_to = start
        for s, e in spans:
            if e <= start or s >= end:
                continue
            s, e = max(s, covered_to), min(e, end)
            if e > s:
                busy += e - s
                covered_to = e
        durations += [e - s for s, e in spans if s >= start and e <= end]
    n = max(len(iterations), 1)
    return GpuBusy(busy_ms=busy / n / 1000.0, wall_ms=walls / n / 1000.0, kernels=len(durations) / n,
                   median_kernel_us=statistics.median(durations) if durations else 0.0)


def attribute(events: Any, modules: dict[str, Any], on_cuda: bool) -> tuple[list[ModuleTime], dict[str, float],
                                                                            float, GpuBusy | None, int]:
    """From the profiler's events: (modules in the order they first ran, outside rows, mean pass wall time,
    GPU busy or None, iterations) with times per iteration in ms. `modules`: qualified name -> module."""
    ordered = sorted(events, key=lambda e: e.time_range.start)
    iterations = [e for e in ordered if str(e.name) == ITERATION_LABEL and on_cpu(e)]
    if not iterations:
        raise TorchperfError("the profiler recorded no complete pass: nothing to attribute")
    tally = _Tally(on_cuda)
    for iteration in iterations:
        tally.iteration(iteration)
    for event in ordered:  # every backward node, on whichever thread autograd ran it, outermost only
        if str(event.name).startswith(BACKWARD_PREFIX) and on_cpu(event):
            parent = getattr(event, "cpu_parent", None)
            while parent is not None and not str(parent.name).startswith(BACKWARD_PREFIX):
                parent = getattr(parent, "cpu_parent", None)
            if parent is None:
                tally.backward_node(event)
    gpu = None
    if on_cuda:
        device_events = [e for e in ordered if not on_cpu(e) and not str(e.name).startswith("torchperf-tui/")]
        gpu = _busy(iterations, device_events)
    n = len(iterations)
    rows = []
    for name in tally.forward:
        module = modules.get(name)
        rows.append(ModuleTime(name=name, type=type(module).__name__ if module is not None else "",
                               leaf=module is None or not any(True for _ in module.children()),
                               forward_ms=tally.forward[name] / n / 1000.0,
                               backward_ms=tally.backward.get(name, 0.0) / n / 1000.0,
                               calls=tally.calls[name] / n, kernels=tally.kernels.get(name, 0) / n))
    for name in tally.backward:  # a module whose forward ran outside the profiled ranges (not expected)
        if name not in tally.forward:
            tally.add_outside("backward outside the modules", tally.backward[name])
    outside = {row: us / n / 1000.0 for row, us in tally.outside.items() if us > 0}
    pass_ms = sum(_wall_us(it) for it in iterations) / n / 1000.0
    return rows, outside, pass_ms, gpu, n


class _ForwardClock:
    """CPU inference without the profiler: each module's wrapped forward reads the clock as it starts and
    ends; its own time is its span less the spans of the modules it calls."""

    def __init__(self) -> None:
        self.own: dict[str, int] = {}
        self.calls: dict[str, int] = {}
        self.outer_ns = 0  # the spans of the outermost modules (the model itself)
        self._stack: list[list] = []  # [name, start, nested ns]

    def attach(self, modules: list[tuple[str, Any]]) -> list[Any]:
        clock, stack = time.perf_counter_ns, self._stack

        def enter(name: str) -> None:
            if name not in self.own:  # rows in the order the modules first ran
                self.own[name], self.calls[name] = 0, 0
            stack.append([name, clock(), 0])

        def leave() -> None:
            if not stack:
                return
            name, start, nested = stack.pop()
            span = clock() - start
            self.own[name] += span - nested
            self.calls[name] += 1
            if stack:
                stack[-1][2] += span
            else:
                self.outer_ns += span

        return wrap_forwards(modules, enter, leave)

    def reset(self) -> None:
        self.own, self.calls, self.outer_ns = {}, {}, 0
        self._stack.clear()


def _clocked(run: Callable[[Any], Any], x: Any, modules: dict[str, Any], iters: int, warmup: int,
             cancelled: Callable[[], bool], host: HostProbe) -> tuple[list[ModuleTime], dict[str, float], float, int] | None:
    """CPU inference: (modules, outside rows, mean pass ms, passes) from the wrapped forwards' clock; None when cancelled
    before a pass. `host` is read at the edges of the timed passes."""
    clock = _ForwardClock()
    handles = clock.attach(list(modules.items()))
    try:
        for _ in range(warmup):
            if cancelled():
                return None
            run(x)
        clock.reset()
        wall, done = 0, 0
        host.begin()
        for _ in range(iters):
            if cancelled():
                break
            start = time.perf_counter_ns()
            run(x)
            wall += time.perf_counter_ns() - start
            done += 1
        host.end()
    finally:
        for handle in handles:
            handle.remove()
    if not done:
        return None
    scale = 1e6 * done

    def row(name: str) -> ModuleTime:
        module = modules.get(name)
        return ModuleTime(name=name, type=type(module).__name__ if module is not None else "",
                          leaf=module is None or not any(True for _ in module.children()),
                          forward_ms=clock.own[name] / scale, calls=clock.calls[name] / done)

    rest = max(0.0, (wall - clock.outer_ns) / scale)
    return [row(name) for name in clock.own], ({"rest of the iteration": rest} if rest > 0 else {}), wall / scale, done


def layer_times(cfg: BenchConfig, *, iters: int = DEFAULT_ITERS, warmup: int = DEFAULT_WARMUP,
                should_cancel: Callable[[], bool] | None = None) -> LayerTimes:
    """Profile `iters` passes (or training steps) of `cfg`'s model under its flags and attribute their time
    to its modules. Needs a fixed input shape; torch.compile is not profiled per module (a compiled graph
    does not call the modules' forwards)."""
    if iters < 1:
        raise TorchperfError(f"iterations must be at least 1, got {iters}")
    if cfg.compile:
        raise TorchperfError("time per layer profiles the eager model: a torch.compile graph runs without "
                             "calling each module, so drop --compile for it")
    if cfg.shapes != "fixed":
        raise TorchperfError(f"shape schedule {cfg.shapes}: time per layer needs one input shape")
    plan = cfg.prepare()
    device, dtype, step, shape = plan.device, plan.dtype, plan.step, plan.shape
    name = model_name(cfg.model)
    on_cuda = device.type == "cuda"
    cancelled = should_cancel or (lambda: False)
    work = prepare_workload(cfg.model, plan.inputs, device, dtype, cfg.channels_last, seed=cfg.seed,
                            model_args=cfg.model_args, quant=cfg.quant, attn=cfg.attn)
    gpu = None
    host = HostProbe(during=DURING)
    try:
        modules = dict(work.model.named_modules())
        with applied_flags(cfg.flags), grad_context(step), \
                forward_errors(name, shape, work.dtype, device, action="timing the layers of"):
            runner = StepRunner(work.model, step, device, seed=cfg.seed)
            if not on_cuda and not step.training:
                clocked = _clocked(runner, work.x, modules, iters, warmup, cancelled, host)
                events, method = None, CPU_CLOCK_METHOD
                if clocked is not None:
                    rows, outside, pass_ms, n = clocked
            else:
                handles = attach_layer_ranges(list(modules.items()))
                try:
                    host.begin()  # the warm-up passes are inside this window: the profiler runs them
                    events, _done, _stopped = profile_iterations(runner, work.x, device, iters, warmup, cancelled)
                    host.end()
                finally:
                    for handle in handles:
                        handle.remove()
                clocked, method = events, CUDA_METHOD if on_cuda else CPU_METHOD
                if events is not None:
                    rows, outside, pass_ms, gpu, n = attribute(events, modules, on_cuda)
        if clocked is None:
            return LayerTimes(**cfg.input_facts(plan.inputs), model=name, device=str(device), input_shape=tuple(shape), step=step.describe(),
                              iters=0, pass_ms=0.0, modules=[], kind="cuda" if on_cuda else "cpu", cancelled=True)
    finally:
        work.release()
    return LayerTimes(**cfg.input_facts(plan.inputs), model=name, device=str(device), input_shape=tuple(shape), step=step.describe(), iters=n,
                      pass_ms=pass_ms, modules=rows, outside=outside, gpu=gpu, kind="cuda" if on_cuda else "cpu",
                      method=method.format(n=n), cancelled=n < iters and cancelled(),
                      host_noise=host.summary([], spread="each pass is profiled: no sample of one pass alone"))
