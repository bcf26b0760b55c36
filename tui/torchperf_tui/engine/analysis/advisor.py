"""`why`: what costs this set-up its time and what to do about it, each fix measured.

In one pass within a time budget, on the set-up as given (a BenchConfig): its timing (the pass's median, the
threads it ran on), the time of each layer (engine/analysis/layer_times.py) beside the FLOPs counted for it on the
meta device (engine/workloads/complexity.py), and its attention calls (engine/measurements/attention_calls.py).
From them, findings, each with the time it puts at stake per pass:

- threads: the pass ran on fewer CPU threads than the box has physical cores. At stake: the share of the pass spent
  in layers that compute (FLOPs counted), which more threads divide, times 1 - used / cores.
- attention runs math: the SDPA set allows only math where a fused backend could take every call. At stake: the
  attention sites' own time in the pass, times 1 - fused / math, the two timed alone for each distinct call (under
  math and under the fastest fused backend that takes it) times its calls a pass.
- a slow layer: a layer that takes SLOW_SHARE of the pass or more, SLOW_FACTOR times what its calls and FLOPs would
  take at the rate the rest of the model reaches (a typical layer's time a call, and the other layers' FLOPs a
  second). At stake: the excess. No option fixes it: it is the layer's code.
- a dtype or a memory format the measured ceilings say is faster (TF32, bfloat16, channels_last): the compute-bound
  layers' FLOPs at the faster rate.
- launch-bound: on a GPU idle a third of the pass or more, waiting for the next launch; the fix is a compiled arm
  (CUDA graphs).
- memory-bound by the GPU's own counters (GPM's DRAM activity): a float32 pass moves half the bytes in bfloat16.
Two findings with one fix are one, with both evidences.

A finding under `threshold_pct` of the pass is counted, not listed. The top `verify` findings with a fix are run as
an interleaved A/B against the set-up (engine/measurements/abtest.py), within what is left of the budget: confirmed
(a significant gain, with its interval), refuted (none, or slower) or not run; the findings are then ranked by the
measured gain where there is one.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
import time
from typing import Callable

from torchperf_tui.core.errors import TorchperfError
from torchperf_tui.core.formatting import compute_rate_text, format_ms
from torchperf_tui.engine.hardware.gpm import gpm_text
from torchperf_tui.engine.hardware.gpu_tenants import tenant_marks
from torchperf_tui.engine.analysis.advice_result import CONFIRMED, INCONCLUSIVE, NOT_RUN, REFUTED, Advice, Finding
from torchperf_tui.engine.measurements.bench_config import BenchConfig
from torchperf_tui.core.attention_settings import CPU_SDPA_BACKENDS, SDPA_BACKENDS, sdpa_backends
from torchperf_tui.engine.analysis.layer_times import layer_times
from torchperf_tui.engine.hardware.ceilings import kept_for
from torchperf_tui.engine.hardware.device import probe_cpu
from torchperf_tui.engine.hardware.lazy_torch import torch
from torchperf_tui.engine.measurements import attention_calls
from torchperf_tui.engine.measurements.ab_arms import parse_arm_spec
from torchperf_tui.engine.measurements.abtest import run_ab
from torchperf_tui.engine.measurements.flags import applied_flags
from torchperf_tui.engine.measurements.timing import run_benchmark
from torchperf_tui.engine.workloads.complexity import analyse_complexity
from torchperf_tui.engine.workloads.inputs import canonical_dtype, dtype_name

THRESHOLD_PCT = 5.0
BUDGET_S = 120.0
VERIFY = 3
SLOW_FACTOR = 3.0
SLOW_SHARE = 0.10  # and a slow layer takes at least this share of the pass (a layer's own glue can reach a few %)
LAYER_ITERS = 3
LAYER_RUNS = 2  # time per layer measured this often, each layer's lower time kept: a stall in one is not a finding
MIN_AB_S = 2.0  # an A/B given less of the budget than this is not started
TIMING_SHARE = 0.25  # of the budget, the set-up's own timing at most

# The seam tests replace: (base config, fix SPEC, time budget s, blocks) -> ABResult.
RunAB = Callable[[BenchConfig, str, float | None, int], object]


def advise(cfg: BenchConfig, *, budget_s: float | None = BUDGET_S, verify: int = VERIFY,
           threshold_pct: float = THRESHOLD_PCT, blocks: int = 10, should_cancel: Callable[[], bool] | None = None,
           on_progress: Callable[[str], None] | None = None, run_fix: RunAB | None = None) -> Advice:
    """The findings for `cfg`, ranked; the top `verify` with a fix measured as A/Bs of `blocks` block pairs."""

    started = time.perf_counter()
    said = on_progress or (lambda line: None)
    cancelled = should_cancel or (lambda: False)

    def left() -> float:
        return math.inf if budget_s is None else budget_s - (time.perf_counter() - started)

    plan = cfg.prepare()
    said("timing the set-up as given")
    own_budget = None if budget_s is None else budget_s * TIMING_SHARE
    timing = run_benchmark(dataclasses.replace(cfg, time_budget_s=_smaller(cfg.time_budget_s, own_budget)),
                           should_cancel=cancelled, warm_start=None)
    if timing.stats is None or cancelled():
        return _advice(cfg, timing, plan, [], threshold_pct, [], [], started, budget_s, cancelled=True)
    pass_ms = timing.stats.p50_ms
    n = timing.stats.n
    measurements = [f"timing: {n} iteration{'s' if n != 1 else ''}, median {format_ms(pass_ms)} ({timing.timer})"]
    layers, skipped = None, []
    if cfg.compile is None and cfg.shapes == "fixed":
        if left() <= 0:
            skipped.append("time per layer")
        else:
            said("timing each layer")
            try:
                runs = [layer_times(cfg, iters=LAYER_ITERS, should_cancel=cancelled)]
                if left() > 0:  # the second measurement only within the budget
                    runs.append(layer_times(cfg, iters=LAYER_ITERS, should_cancel=cancelled))
            except TorchperfError as exc:  # the findings that need it are not made; the others are
                measurements.append(f"time per layer: not measured ({exc})")
            else:
                layers = _lower_layer_times(runs)
                measurements.append(f"time per layer: each layer's lower time of {len(runs)} measurement"
                                    f"{'s' if len(runs) != 1 else ''} of {layers.iters} passes, {layers.method}")
    flops = _layer_flops(cfg, plan)
    if flops:
        measurements.append("FLOPs per layer: counted on the meta device")
    attention = []
    if left() > 0:
        attention = _attention_findings(cfg, plan.device, pass_ms, layers, said, measurements)
    elif cfg.flags.sdpa != "all":
        skipped.append("the attention calls")
    conditions = getattr(timing, "conditions", None)
    if getattr(timing, "compile_s", None) is not None:
        measurements.append(f"compile: {_compile_line(timing)}")
    if conditions is not None and conditions.gpm:
        measurements.append(f"the GPU's GPM counters over the timing: {gpm_text(conditions.gpm)}")
    kept = _kept_ceilings(cfg, plan.device, measurements)
    findings = [*_thread_findings(timing, layers, flops, pass_ms, plan.device), *attention,
                *_launch_findings(layers, conditions, pass_ms),
                *_gpm_findings(cfg, plan.device.type, conditions, pass_ms),
                *_layer_findings(layers, flops, pass_ms),
                *_ceiling_findings(cfg, plan.device.type, _capability(plan.device), layers, flops, pass_ms, kept)]
    for finding in findings:  # no fix saves more than the whole pass
        finding.at_stake_ms = min(max(0.0, finding.at_stake_ms), pass_ms)
    findings = _merged(findings)
    listed = [f for f in findings if f.share * 100.0 >= threshold_pct]
    _verify(cfg, listed, verify, blocks, left, cancelled, said, run_fix or _run_fix)
    listed.sort(key=lambda f: f.rank())
    ranked_layers = sorted(((m.name, m.ms) for m in (layers.modules if layers else []) if m.name), key=lambda p: -p[1])
    advice = _advice(cfg, timing, plan, listed, threshold_pct, ranked_layers, measurements, started, budget_s,
                     cancelled=cancelled())
    advice.below = len(findings) - len(listed)
    advice.roofline = roofline_points(layers, flops)
    advice.roofs = _roofs(cfg, plan.device.type, kept)
    advice.notes.extend(throttle_notes(conditions, pass_ms))
    advice.gpu_marks = tenant_marks(conditions)
    if skipped:
        advice.notes.append(f"not measured, the {budget_s:g} s budget spent: {', '.join(skipped)} (--budget gives "
                            "more)")
    if budget_s is not None and advice.duration_s > budget_s * 1.05:
        advice.notes.append(f"the evidence took {advice.duration_s:.0f} s, past the {budget_s:g} s budget: a stage "
                            "once started runs to its end (the set-up's timing is cut to a quarter of the budget)")
    return advice


def _lower_layer_times(runs: list):
    """One LayerTimes of several measurements of the same pass: each module's lower time, the lower pass. A stall of
    the host (another process taking the core) lands in one module of one measurement; taking the lower keeps it
    from reading as a slow layer, or from hiding one."""
    measured = [run for run in runs if run.modules]
    if not measured:
        return runs[0]
    first = measured[0]
    times = [run.by_name() for run in measured]

    def lower(module):
        rows = [t[module.name] for t in times if module.name in t]
        return dataclasses.replace(module, forward_ms=min(r.forward_ms for r in rows),
                                   backward_ms=min(r.backward_ms for r in rows))

    return dataclasses.replace(first, modules=[lower(m) for m in first.modules],
                               pass_ms=min(run.pass_ms for run in measured))


def roofline_points(layers, flops: dict[str, tuple[int, int]]) -> list[tuple[str, float, float]]:
    """(layer, FLOPs a byte, FLOP/s reached) for each layer with FLOPs and bytes counted and its own time measured."""
    if layers is None:
        return []
    points = []
    for module in layers.modules:
        work, moved = flops.get(module.name, (0, 0))
        if module.name and work > 0 and moved > 0 and module.ms > 0:
            points.append((module.name, work / moved, work / (module.ms / 1000.0)))
    return points


def _roofs(cfg: BenchConfig, device_type: str, kept) -> tuple[float | None, float | None]:
    """The roofs kept for the device: the compute ceiling the set-up runs at (TF32 where a float32 GPU set-up has
    it on), the copy's bandwidth."""
    if kept is None:
        return None, None
    compute, copy = kept.compute(ceiling_name(cfg, device_type)), kept.copy()
    return (compute.value if compute is not None else None), (copy.value if copy is not None else None)


def ceiling_name(cfg: BenchConfig, device_type: str) -> str:
    """The compute ceiling the set-up runs at: its dtype's, or TF32 where a float32 set-up on a GPU has it on."""
    dtype = canonical_dtype(cfg.dtype)
    tf32_on = device_type == "cuda" and dtype == "float32" and cfg.flags.tf32_matmul and cfg.flags.tf32_cudnn
    return "tf32" if tf32_on else dtype


def _smaller(a: float | None, b: float | None) -> float | None:
    values = [v for v in (a, b) if v is not None]
    return min(values) if values else None


def _advice(cfg, timing, plan, findings, threshold_pct, layers, measurements, started, budget_s, cancelled) -> Advice:
    stats = timing.stats
    return Advice(**cfg.input_facts(plan.inputs), model=timing.model, device=timing.device, step=plan.step.describe(),
                  input_shape=tuple(timing.input_shape), dtype=dtype_name(plan.dtype), flags_text=timing.flags_text(),
                  pass_ms=stats.p50_ms if stats is not None else 0.0, samples_ms=list(timing.samples_ms),
                  threshold_pct=threshold_pct, findings=findings, layers=layers[:12], measurements=measurements,
                  budget_s=budget_s, duration_s=time.perf_counter() - started, cancelled=cancelled,
                  host_noise=timing.host_noise, config=cfg, flags=timing.flags, threads_used=timing.threads_used)


def _layer_flops(cfg: BenchConfig, plan) -> dict[str, tuple[int, int]]:
    """Each layer's own forward (FLOPs, bytes in and out), counted on the meta device (empty where the model cannot
    run there)."""
    if not isinstance(cfg.model, str):
        return {}
    try:
        complexity = analyse_complexity(cfg.model, plan.shape, cfg.dtype, inputs=plan.inputs,
                                         model_args=cfg.model_args)
    except Exception:  # noqa: BLE001 - a model meta cannot run: the findings that need FLOPs are not made
        return {}
    itemsize = plan.dtype.itemsize
    return {layer.name: (layer.flops, layer.output_bytes + math.prod(layer.input_shape) * itemsize)
            for layer in complexity.layers}


# -- the findings ---------------------------------------------------------------------------------------------------

def _thread_findings(timing, layers, flops: dict[str, tuple[int, int]], pass_ms: float, device) -> list[Finding]:
    if device.type != "cpu":
        return []
    used = timing.threads_used
    cores = probe_cpu().physical_cores
    if not isinstance(cores, int) or used is None or used >= cores:
        return []
    if layers is not None and layers.modules and flops:
        computing = sum(m.ms for m in layers.modules if flops.get(m.name, (0, 0))[0] > 0)
        parallel = min(1.0, computing / layers.pass_ms) if layers.pass_ms > 0 else 1.0
        where = (f"time per layer: {parallel * 100:.0f} % of the pass in layers that compute (FLOPs counted), "
                 "which more threads divide")
    else:
        parallel, where = 1.0, "no time per layer: the whole pass taken as divisible"
    at_stake = pass_ms * parallel * (1.0 - used / cores)
    return [Finding("threads", f"the pass runs on {used} CPU thread{'s' if used != 1 else ''} of {cores} physical "
                               "cores", [f"timing: {used} thread{'s' if used != 1 else ''} in effect", f"the box: "
                                         f"{cores} physical cores", where],
                    at_stake_ms=at_stake, pass_ms=pass_ms, fix=f"threads={cores}", options=f"--threads {cores}")]


LAUNCH_BOUND_IDLE = 0.30  # the GPU idle this share of a profiled pass or more: it waits for the next launch


def _launch_findings(layers, conditions, pass_ms: float) -> list[Finding]:
    """On a GPU: a pass whose device sat idle LAUNCH_BOUND_IDLE of its time or more waits for Python to launch the
    next kernel; at stake, that idle share. CUDA graphs (torch.compile's reduce-overhead) replay the launches: the fix
    is an A/B of a compiled arm (compiled before its blocks, its compile time and break-even said apart)."""
    gpu = getattr(layers, "gpu", None)
    if gpu is None or gpu.idle_pct < LAUNCH_BOUND_IDLE * 100:
        return []
    evidence = [f"time per layer: {gpu.summary()}"]
    if conditions is not None and "sm_active" in conditions.gpm:
        evidence.append(f"GPM over the timing: SM active {conditions.gpm['sm_active']:.0f} %")
    return [Finding("launch_bound", f"the GPU sits idle {gpu.idle_pct:.0f} % of the pass, waiting for the next "
                                    "kernel's launch", evidence, at_stake_ms=pass_ms * gpu.idle_pct / 100.0,
                    pass_ms=pass_ms, fix="compile=reduce-overhead", options="--compile reduce-overhead")]


MEMORY_BOUND_DRAM = 50.0  # GPM's DRAM activity over the timing at or above this percentage: the pass waits on memory
HALF_WIDTH = {"float32": "bfloat16"}  # a float32 pass's half-width dtype: half the bytes to move


def _gpm_findings(cfg: BenchConfig, device_type: str, conditions, pass_ms: float) -> list[Finding]:
    """On a GPU with GPM counters: a pass whose DRAM was active MEMORY_BOUND_DRAM of the timing or more waits on
    memory, by the GPU's own counters. A float32 one moves half the bytes in bfloat16: at stake, half of its DRAM-active
    share of the pass (the bytes halved, that time halved). Said alone, not as a fix, for a pass already half-width."""
    gpm = getattr(conditions, "gpm", None) or {}
    dram = gpm.get("dram_active")
    if device_type != "cuda" or dram is None or dram < MEMORY_BOUND_DRAM:
        return []
    dtype = canonical_dtype(cfg.dtype)
    target = HALF_WIDTH.get(dtype)
    if target is None or cfg.quant is not None:
        return []
    evidence = [f"GPM over the timing: {gpm_text(gpm)}", f"DRAM active {dram:.0f} % of the timing, at or above "
                f"{MEMORY_BOUND_DRAM:.0f} %: the pass is memory-bound by the GPU's own counters"]
    return [Finding("memory_bound", f"the pass is memory-bound (DRAM active {dram:.0f} %) in {dtype}; {target} moves "
                                    "half the bytes", evidence, at_stake_ms=pass_ms * dram / 100.0 * 0.5,
                    pass_ms=pass_ms, fix=f"dtype={target}", options=f"--dtype {target}", changes_numerics=True)]


def _compile_line(timing) -> str:
    """A compiled set-up's compile, as the timing measured it: its cold start and the passes after which it pays."""
    cost = getattr(timing, "compile_cost", None)
    calls = getattr(cost, "break_even_calls", None)
    pays = (f"it pays for itself after {calls:,} passes against eager" if calls is not None else
            f"break-even: {getattr(cost, 'break_even_note', '') or 'not measured'}")
    return f"{timing.compile_mode} compiled in {timing.compile_s:.1f} s (the cold start, not in the samples); {pays}"


def throttle_notes(conditions, pass_ms: float) -> list[str]:
    """A GPU throttled during the timing, said beside the findings rather than ranked among them (no option fixes it,
    and every figure here ran under it), with the pass's time at its clock's shortfall from its maximum. (A busy host
    is said as the result's disturbance, as for any run.)"""
    if conditions is None or not getattr(conditions, "throttled", False) or not conditions.sm_clock_mhz \
            or not conditions.sm_clock_max_mhz or conditions.sm_clock_mhz >= conditions.sm_clock_max_mhz:
        return []
    shortfall = 1.0 - conditions.sm_clock_mhz / conditions.sm_clock_max_mhz
    return [f"the GPU was {conditions.throttle_text()}; at its clock's shortfall ({shortfall * 100:.0f} %) about "
            f"{format_ms(pass_ms * shortfall)} of the pass"]


def _merged(findings: list[Finding]) -> list[Finding]:
    """One finding a fix: where two findings (a ceiling's, the counters') give the same fix, the larger stake is kept
    with the other's evidence beside its own."""
    by_fix: dict[str, Finding] = {}
    kept = []
    for finding in sorted(findings, key=lambda f: -f.at_stake_ms):
        first = by_fix.get(finding.fix) if finding.fix else None
        if first is None:
            if finding.fix:
                by_fix[finding.fix] = finding
            kept.append(finding)
        else:
            first.evidence.extend(line for line in finding.evidence if line not in first.evidence)
    return kept


def _attention_findings(cfg: BenchConfig, device, pass_ms: float, layers, said,
                        measurements: list[str]) -> list[Finding]:
    allowed = sdpa_backends(cfg.flags.sdpa)
    if any(b != "math" for b in allowed):
        return []  # a fused backend is allowed: what runs is torch's choice (the kernels view says which)
    calls = attention_calls.meta_calls(cfg)
    if not calls:
        return []
    said("timing the attention calls under each backend")
    fused = [b for b in SDPA_BACKENDS if b != "math" and (device.type == "cuda" or b in CPU_SDPA_BACKENDS)]
    best_of, counted = {}, {}
    for call in calls:
        key = call.signature()
        counted[key] = counted.get(key, 0) + 1
        if key in best_of:
            continue
        math_ms = attention_calls.call_ms(call, "math", device)
        options = {b: attention_calls.call_ms(call, b, device) for b in fused}
        options = {b: ms for b, ms in options.items() if ms is not None}
        if math_ms is None or not options:
            best_of[key] = None
            continue
        backend = min(options, key=options.get)
        best_of[key] = (backend, math_ms, options[backend])
    if any(best is None for best in best_of.values()):
        return []  # a call no fused backend takes: math is the only way for it
    backends = sorted({best[0] for best in best_of.values()})
    math_total = sum(counted[k] * best_of[k][1] for k in best_of)
    fused_total = sum(counted[k] * best_of[k][2] for k in best_of)
    sites = list(dict.fromkeys(call.site for call in calls))
    timed = layers.by_name() if layers is not None else {}
    in_model = sum(timed[site].ms for site in sites if site in timed)
    if in_model > 0 and math_total > 0 and all(site in timed for site in sites):
        # the sites' own time in the model (the calls and their reshapes) at the calls' fused / math ratio: alone, a
        # call runs on other tensors in other caches, so the ratio is taken from it, not the time
        saved = in_model * max(0.0, 1.0 - fused_total / math_total) * pass_ms / layers.pass_ms
        scale = (f"time per layer: the attention sites' own time {format_ms(in_model)} a pass, at that ratio "
                 f"({fused_total / math_total:.2f})")
    else:  # the calls' own times: what each distinct call saves, times its calls a pass
        saved = sum(counted[key] * max(0.0, math_ms - fused_ms) for key, (_, math_ms, fused_ms) in best_of.items())
        scale = "no time per layer of the sites: the calls' own times taken as they are"
    measurements.append(f"attention calls: {len(best_of)} distinct of {len(calls)} a pass, each timed alone under "
                        "math and each fused backend")
    return [Finding("attention_math", f"attention runs math (sdpa={cfg.flags.sdpa}) where "
                                      f"{' and '.join(backends)} could take every call",
                    [f"flags: sdpa={cfg.flags.sdpa} allows math alone", f"attention calls: {len(calls)} a pass at "
                     f"{len(sites)} site{'s' if len(sites) != 1 else ''} "
                     f"({sites[0]}{' ...' if len(sites) > 1 else ''}),"
                     f" {calls[0].describe()}", f"attention calls timed alone: {format_ms(math_total)} a pass under "
                     f"math, {format_ms(fused_total)} under {' and '.join(backends)}", scale],
                    at_stake_ms=saved, pass_ms=pass_ms, fix="sdpa=all", options="--sdpa all")]


def _layer_findings(layers, flops: dict[str, tuple[int, int]], pass_ms: float) -> list[Finding]:
    """A layer that takes SLOW_FACTOR times what the rest of the model's rates say it should: its calls at a typical
    layer's time a call, plus the longer of its FLOPs at the others' FLOPs a ms and its bytes at their bytes a ms."""
    if layers is None or not layers.modules or layers.pass_ms <= 0:
        return []
    rows = [m for m in layers.modules if m.name and m.calls > 0]
    if len([m for m in rows if m.ms > 0]) < 3:
        return []
    found = []
    scale = pass_ms / layers.pass_ms  # the profiled pass against the timing's median
    for row in rows:
        others = [m for m in rows if m is not row]
        # a layer's time a call here, the others': dispatch and the small work most do
        typical = statistics.median(m.ms / m.calls for m in others if m.ms > 0)
        other_flops = sum(flops.get(m.name, (0, 0))[0] for m in others)
        other_bytes = sum(flops.get(m.name, (0, 0))[1] for m in others)
        other_ms = sum(m.ms for m in others)
        rate = other_flops / other_ms if other_ms > 0 and other_flops > 0 else None  # FLOPs a ms
        byte_rate = other_bytes / other_ms if other_ms > 0 and other_bytes > 0 else None  # bytes a ms
        own, own_bytes = flops.get(row.name, (0, 0))
        work = max(own / rate if rate and own else 0.0, own_bytes / byte_rate if byte_rate and own_bytes else 0.0)
        expected = row.calls * typical + work
        share = row.ms / layers.pass_ms
        if row.ms < SLOW_FACTOR * expected or share < SLOW_SHARE:
            continue
        achieved = (f"{own / row.ms / 1e6:.3g} GFLOP/s against {rate / 1e6:.3g} GFLOP/s for the rest of the model"
                    if rate and own else "no FLOPs counted for it")
        found.append(Finding("slow_layer", f"layer {row.name} ({row.type}) takes {share * 100:.0f} % of the pass",
                             [f"time per layer: {format_ms(row.ms)} of a {format_ms(layers.pass_ms)} pass, "
                              f"{row.calls:g} call{'s' if row.calls != 1 else ''}",
                              f"FLOPs per layer: {achieved}",
                              f"expected at the rest's rates: {format_ms(expected)} ({row.calls:g} x a typical layer's "
                              f"{format_ms(typical)} a call" + (f" + {format_ms(work)} for its FLOPs or bytes at the "
                                                                "others' rates)" if work else ")")],
                             at_stake_ms=(row.ms - expected) * scale, pass_ms=pass_ms, layer=row.name,
                             why_not_run="no option fixes it: the layer's own code"))
    return found


def _capability(device) -> tuple[int, int] | None:
    return tuple(torch.cuda.get_device_capability(device)) if device.type == "cuda" else None


def _kept_ceilings(cfg: BenchConfig, device, measurements: list[str]):
    """The ceilings kept for the device at the run's thread count (a CPU's are kept per count); None, said among the
    measurements, when there are none or they cannot be read."""
    with applied_flags(cfg.flags):
        kept = kept_for(str(device), on_corrupt=lambda line: measurements.append(f"ceilings: {line}"))
    if kept is None:
        measurements.append("no measured ceilings kept for the device: the dtype and layout findings need them "
                            "(C / torchperf-tui ceilings)")
    else:
        measurements.append(f"measured ceilings kept for {kept.key}")
    return kept


def _best_conv(ceiling, channels_last: bool) -> float | None:
    """The best 3x3 convolution rate a compute ceiling tried, in one memory format."""
    rates = [t.value for t in ceiling.tried if t.value and t.workload.startswith("conv2d")
             and t.workload.endswith("channels_last") == channels_last]
    return max(rates) if rates else None


def _ceiling_findings(cfg: BenchConfig, device_type: str, capability, layers, flops: dict[str, tuple[int, int]],
                      pass_ms: float, kept) -> list[Finding]:
    """What a dtype or a memory format would save, from the measured ceilings: each layer whose FLOPs at the
    ceiling it runs at now take at least half its time (compute-bound) would take its FLOPs at the other's rate.
    TF32 and bfloat16 where a float32 model runs on a GPU that has them (compute capability 8.0+); channels_last
    where the conv ceiling measured faster in it than in NCHW. Each changes numerics but channels_last."""
    if kept is None or layers is None or not layers.modules or not flops or layers.pass_ms <= 0:
        return []

    dtype = canonical_dtype(cfg.dtype)
    cuda = device_type == "cuda"
    now_name = ceiling_name(cfg, device_type)
    tf32_on = now_name == "tf32"
    now = kept.compute(now_name)
    if now is None or not now.value:
        return []
    scale = pass_ms / layers.pass_ms

    def compute_ms(name: str, rate: float) -> float:
        return flops.get(name, (0, 0))[0] / rate * 1000.0

    bound = [m for m in layers.modules if m.name and flops.get(m.name, (0, 0))[0] > 0
             and compute_ms(m.name, now.value) >= 0.5 * m.ms]
    if not bound:
        return []
    bound_ms = sum(m.ms for m in bound)
    where = (f"time per layer: {len(bound)} compute-bound layer{'s' if len(bound) != 1 else ''} "
             f"({format_ms(bound_ms)} of a {format_ms(layers.pass_ms)} pass: their FLOPs at the {now_name} ceiling "
             "take half their time or more)")
    ampere = capability is not None and tuple(capability) >= (8, 0)
    found = []
    for target, fix, options, applies in (
            ("tf32", "tf32=on", "--tf32", cuda and ampere and dtype == "float32" and not tf32_on),
            ("bfloat16", "dtype=bfloat16", "--dtype bfloat16", cuda and ampere and dtype == "float32")):
        ceiling = kept.compute(target)
        if not applies or ceiling is None or not ceiling.value or ceiling.value <= now.value:
            continue
        saved = sum(compute_ms(m.name, now.value) for m in bound) * (1.0 - now.value / ceiling.value) * scale
        found.append(Finding(f"dtype_{target}", f"the compute-bound layers run at the {now_name} ceiling; {target} "
                                                f"reaches {ceiling.value / now.value:.1f}x it on this device",
                             [f"measured ceilings: {target} {compute_rate_text(ceiling.value)}, {now_name} "
                              f"{compute_rate_text(now.value)}", where],
                             at_stake_ms=saved, pass_ms=pass_ms, fix=fix, options=options, changes_numerics=True))
    convs = [m for m in bound if "Conv" in m.type]
    nchw, nhwc = _best_conv(now, False), _best_conv(now, True)
    if convs and not cfg.channels_last and nchw and nhwc and nhwc > nchw:
        saved = sum(compute_ms(m.name, now.value) for m in convs) * (1.0 - nchw / nhwc) * scale
        found.append(Finding("channels_last", f"the convolutions run in NCHW; channels_last convolutions reach "
                                              f"{nhwc / nchw:.2f}x their rate on this device",
                             [f"measured ceilings: {now_name} 3x3 convolutions at {compute_rate_text(nhwc)} "
                              f"channels_last against {compute_rate_text(nchw)} NCHW",
                              f"time per layer: {len(convs)} compute-bound convolution{'s' if len(convs) != 1 else ''}"
                              f" ({format_ms(sum(m.ms for m in convs))} of the pass)"],
                             at_stake_ms=saved, pass_ms=pass_ms, fix="channels_last=on", options="--channels-last"))
    return found


# -- the fixes measured ----------------------------------------------------------------------------------------------

def _run_fix(cfg: BenchConfig, fix: str, budget_s: float | None, blocks: int):
    # A is the set-up as given, B the same with the fix: both arms on the set-up's own flags
    return run_ab(cfg, parse_arm_spec("", base=cfg.flags), parse_arm_spec(fix, base=cfg.flags), blocks=blocks,
                  time_budget_s=budget_s)


def _verify(cfg, findings: list[Finding], verify: int, blocks: int, left, cancelled, said, run_fix: RunAB) -> None:
    fixable = [f for f in findings if f.fix][:max(0, verify)]
    if getattr(cfg, "compile", None) is not None:  # an A/B compiles one arm at most (abtest.compiled_mode)
        for finding in fixable:
            finding.why_not_run = "the set-up is compiled: an A/B of its fix would compile both arms"
        fixable = []
    for index, finding in enumerate(fixable):
        share = left() / (len(fixable) - index)
        if cancelled() or share < MIN_AB_S:
            finding.why_not_run = "out of budget" if not cancelled() else "cancelled"
            continue
        said(f"measuring the fix {finding.options} as an A/B")
        result = run_fix(cfg, finding.fix, None if math.isinf(share) else share, blocks)
        verdict = getattr(result, "verdict", None)
        if verdict is None:
            finding.why_not_run = "the A/B ended before a verdict (too few block pairs)"
            continue
        finding.ratio, finding.ci_low, finding.ci_high, finding.p_value = (verdict.ratio, verdict.ci_low,
                                                                           verdict.ci_high, verdict.p_value)
        finding.a_median_ms = result.a.median_ms
        if verdict.significant and verdict.ratio < 1:
            finding.verdict = CONFIRMED
        elif verdict.ci_low >= 1 or (verdict.significant and verdict.ratio >= 1):
            finding.verdict = REFUTED  # no gain in the interval, or significantly slower
        else:
            finding.verdict = INCONCLUSIVE
    for finding in findings:
        if finding.fix and finding.verdict == NOT_RUN and finding.why_not_run is None:
            finding.why_not_run = f"not asked (--verify {verify})"
