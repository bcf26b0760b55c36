"""torch.profiler over a few iterations: the top operators by self time, and a Chrome trace for Perfetto.

The model is warmed up outside the profiler (the first iterations hold one-off costs: oneDNN primitive
creation, cuDNN autotuning, lazy module loading), then `iters` iterations are recorded with CPU activity
and, on a GPU, CUDA activity, with input shapes and memory. Each iteration is wrapped in a user
annotation so the trace shows where one ends and the next begins; the annotations are left out of the
operator table.

Event attributes changed names across torch releases (`self_cuda_time_total` became
`self_device_time_total` in 2.4, `self_cuda_memory_usage` became `self_device_memory_usage`): every read
goes through `_attr`, which tries the new name first.
"""

from __future__ import annotations

import time
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

from torchperf_tui.core.output_files import artifact_path, check_output_path, write_output
from torchperf_tui.engine.hardware.lazy_torch import torch

from torchperf_tui.engine.measurements.bench_config import BenchConfig
from torchperf_tui.engine.workloads.input_facts import RecordedPasses
from torchperf_tui.core.errors import TorchperfError
from torchperf_tui.engine.measurements.flags import applied_flags
from torchperf_tui.engine.workloads.inputs import dtype_name
from torchperf_tui.engine.workloads.layer_ranges import ITERATION_LABEL
from torchperf_tui.engine.hardware.nvml import to_jsonable
from torchperf_tui.engine.workloads.workload import forward_errors, prepare_workload
from torchperf_tui.engine.measurements.train_step import StepRunner, grad_context

DEFAULT_ITERS = 5
DEFAULT_WARMUP = 3

ShouldCancel = Callable[[], bool]


@dataclass
class OpStat:
    """One operator, averaged over the profiled iterations' calls (times in ms, totals over all calls)."""

    name: str
    calls: int
    self_cpu_ms: float
    cpu_total_ms: float
    self_device_ms: float  # 0.0 on the CPU
    device_total_ms: float
    input_shapes: str  # e.g. "[[8, 3, 224, 224], [64, 3, 7, 7], [], ...]"; "" when not grouped by shape
    self_cpu_memory_bytes: int  # net bytes allocated by the op itself (negative when it frees)
    self_device_memory_bytes: int
    # "op" (a CPU-side operator: its self device time is that of the kernels it launched itself) or
    # "kernel" (a GPU kernel or memcpy row, as CUPTI recorded it). Both kinds carry the same device time,
    # so device totals are summed over kernels only, as torch's own table does.
    kind: str = "op"

    def to_dict(self) -> dict[str, Any]:
        return to_jsonable(self)


# Sort keys a user can pick, and which field each orders by (descending; name ascending).
SORT_KEYS: dict[str, str] = {
    "self_cpu": "self_cpu_ms",
    "self_device": "self_device_ms",
    "cpu_total": "cpu_total_ms",
    "device_total": "device_total_ms",
    "calls": "calls",
    "self_cpu_memory": "self_cpu_memory_bytes",
    "self_device_memory": "self_device_memory_bytes",
    "name": "name",
}


def sort_ops(ops: Iterable[OpStat], key: str = "self_cpu") -> list[OpStat]:
    if key not in SORT_KEYS:
        raise TorchperfError(f"unknown sort key {key!r}: choose one of {', '.join(SORT_KEYS)}")
    field_name = SORT_KEYS[key]
    if key == "name":
        return sorted(ops, key=lambda op: op.name)
    return sorted(ops, key=lambda op: (-getattr(op, field_name), op.name))


@dataclass
class ProfileResult(RecordedPasses):
    activities: list[str]  # "cpu", "cuda"
    sort_by: str
    ops: list[OpStat]  # every operator, sorted by `sort_by`
    total_self_cpu_ms: float  # sums over every operator: the shares below are of these
    total_self_device_ms: float
    trace_path: str | None  # Chrome trace JSON (open in https://ui.perfetto.dev); None when not exported
    cancelled: bool
    duration_s: float
    notes: list[str] = field(default_factory=list)
    step: str = "infer"  # what each iteration was: "infer", or "train (sgd)"; " · amp bf16" under autocast

    def top(self, n: int = 20) -> list[OpStat]:
        """The first `n` rows, in the result's order."""
        return self.ops[:n]

    def share_pct(self, op: OpStat) -> float:
        """The op's share of all self time (device time on a GPU, else CPU time)."""
        if self.total_self_device_ms > 0:
            return 100.0 * op.self_device_ms / self.total_self_device_ms
        return 100.0 * op.self_cpu_ms / self.total_self_cpu_ms if self.total_self_cpu_ms > 0 else 0.0

    def to_dict(self, top: int | None = None) -> dict[str, Any]:
        data = to_jsonable(self)
        if top is not None:
            data["ops"] = [op.to_dict() for op in self.ops[:top]]
        return data


def _attr(event: Any, *names: str) -> Any:
    """The first of the attributes `names` that the event has (torch renamed cuda_* to device_*), else 0."""
    for name in names:
        value = getattr(event, name, None)
        if value is not None:
            return value
    return 0


def _is_annotation(event: Any) -> bool:
    if getattr(event, "is_user_annotation", False):
        return True
    return str(getattr(event, "key", "")).startswith(ITERATION_LABEL) or str(
        getattr(event, "key", "")).startswith("ProfilerStep#")


def _on_device(event: Any) -> bool:
    device_type = getattr(event, "device_type", None)
    return device_type is not None and getattr(device_type, "name", str(device_type)).split(".")[-1] != "CPU"


def total_self_device_ms(ops: Iterable[OpStat]) -> float:
    """Device time of the profiled iterations: the kernels' rows (ops' rows repeat the same time)."""
    ops = list(ops)
    kernels = [op for op in ops if op.kind == "kernel"]
    return sum(op.self_device_ms for op in (kernels or ops))


def summarise_events(events: Iterable[Any]) -> list[OpStat]:
    """Turn `prof.key_averages(...)` entries into OpStats (times from microseconds to ms)."""
    ops = []
    for e in events:
        if _is_annotation(e):
            continue
        shapes = getattr(e, "input_shapes", None)
        ops.append(OpStat(
            name=str(e.key),
            calls=int(_attr(e, "count")),
            self_cpu_ms=float(_attr(e, "self_cpu_time_total")) / 1000.0,
            cpu_total_ms=float(_attr(e, "cpu_time_total")) / 1000.0,
            self_device_ms=float(_attr(e, "self_device_time_total", "self_cuda_time_total")) / 1000.0,
            device_total_ms=float(_attr(e, "device_time_total", "cuda_time_total")) / 1000.0,
            input_shapes=str(shapes) if shapes else "",
            self_cpu_memory_bytes=int(_attr(e, "self_cpu_memory_usage")),
            self_device_memory_bytes=int(_attr(e, "self_device_memory_usage", "self_cuda_memory_usage")),
            kind="kernel" if _on_device(e) else "op",
        ))
    return ops


def default_trace_path(model: str) -> str:
    """<temp dir>/torchperf-tui/traces/<model>-<UTC time>-<pid>.json."""
    return artifact_path("traces", model, "json")


def profile_callable(fn: Callable[[], object], *, device: torch.device | str = "cpu", iters: int = DEFAULT_ITERS,
                     warmup: int = DEFAULT_WARMUP, sort_by: str | None = None,
                     trace_path: str | None | bool = None, label: str = "model",
                     should_cancel: ShouldCancel | None = None) -> tuple[list[OpStat], dict[str, Any]]:
    """Profile `fn` (one forward pass): `warmup` passes unrecorded, then `iters` recorded ones.

    `trace_path`: None -> default_trace_path(label); a str -> that file; False -> no trace.
    Returns (ops sorted by `sort_by`, facts: activities, iters, trace_path, cancelled, totals).
    """
    from torch.profiler import ProfilerActivity, profile, record_function

    device = torch.device(device)
    if iters < 1:
        raise TorchperfError(f"iterations must be at least 1, got {iters}")
    on_cuda = device.type == "cuda"
    sort_by = sort_by or ("self_device" if on_cuda else "self_cpu")
    if sort_by not in SORT_KEYS:
        raise TorchperfError(f"unknown sort key {sort_by!r}: choose one of {', '.join(SORT_KEYS)}")
    cancelled = should_cancel or (lambda: False)

    def sync() -> None:
        if on_cuda:
            torch.cuda.synchronize(device)

    for _ in range(warmup):
        if cancelled():
            return [], {"activities": [], "iters": 0, "trace_path": None, "cancelled": True}
        fn()
    sync()
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if on_cuda else [])
    done = 0
    was_cancelled = False
    with warnings.catch_warnings():
        # torch 2.11 warns at exit that a profiler without a schedule "clears events at the end of each
        # cycle": there is one cycle here, and every event of it is kept.
        warnings.filterwarnings("ignore", message=".*clears events at the end of each cycle.*")
        with profile(activities=activities, record_shapes=True, profile_memory=True) as prof:
            for i in range(iters):
                if cancelled():
                    was_cancelled = True
                    break
                with record_function(f"{ITERATION_LABEL} {i}"):
                    fn()
                    sync()  # so the iteration's annotation spans its kernels, not just their launches
                done += 1
    path: str | None = None
    if trace_path is not False and done:
        default = trace_path in (None, True)
        path = default_trace_path(label) if default else str(trace_path)
        # Beside the target, then renamed: a device, a folder or a link at the path is refused, not replaced.
        path = str(write_output(path, prof.export_chrome_trace, make_parents=default))
    ops = sort_ops(summarise_events(prof.key_averages(group_by_input_shape=True)), sort_by)
    facts = {
        "activities": ["cpu"] + (["cuda"] if on_cuda else []),
        "iters": done,
        "trace_path": path,
        "cancelled": was_cancelled,
        "sort_by": sort_by,
    }
    return ops, facts


def profile_model(cfg: BenchConfig, *, iters: int = DEFAULT_ITERS, warmup: int = DEFAULT_WARMUP,
                  sort_by: str | None = None, trace_path: str | None | bool = None,
                  should_cancel: ShouldCancel | None = None) -> ProfileResult:
    """Build `cfg.model`, profile `iters` iterations under `cfg.flags` (restored afterwards): forward passes,
    or with `cfg.step == "train"` training steps (forward, loss, backward, optimizer step, under autocast with
    `cfg.amp`), so the backward's and the optimizer's ops are in the table and the trace.

    Sorted by self device time on a GPU, self CPU time on the CPU, unless `sort_by` says otherwise.
    """
    started = time.time()
    if isinstance(trace_path, str):
        check_output_path(trace_path)  # a path that will be refused is one line now, not after the profile
    plan = cfg.prepare()
    device, dtype, step, shape = plan.device, plan.dtype, plan.step, plan.shape
    work = prepare_workload(cfg.model, plan.inputs, device, dtype, cfg.channels_last,
                            model_args=cfg.model_args, quant=cfg.quant, attn=cfg.attn)
    try:
        model, x = work.model, work.x
        run_step = StepRunner(model, step, device, seed=cfg.seed)

        def iteration() -> object:
            return run_step(x)

        with applied_flags(cfg.flags), grad_context(step), \
                forward_errors(cfg.model, shape, dtype, device, action="profiling"):
            ops, facts = profile_callable(iteration, device=device, iters=iters, warmup=warmup,
                                          sort_by=sort_by, trace_path=trace_path, label=cfg.model,
                                          should_cancel=should_cancel)
        del model, x, iteration, run_step
    finally:
        work.release()
    notes = []
    if device.type == "cuda":
        notes.append("device times are from CUPTI kernel records; CPU times include the profiler's overhead")
    return ProfileResult(
        **cfg.input_facts(plan.inputs),
        model=cfg.model, device=str(device), input_shape=tuple(shape), dtype=dtype_name(dtype),
        iters=facts["iters"], activities=facts["activities"], sort_by=facts.get("sort_by", sort_by or ""),
        ops=ops, total_self_cpu_ms=sum(op.self_cpu_ms for op in ops),
        total_self_device_ms=total_self_device_ms(ops), trace_path=facts["trace_path"],
        cancelled=facts["cancelled"], duration_s=time.time() - started, notes=notes, step=step.describe(),
    )
