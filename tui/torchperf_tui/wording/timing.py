"""A timing run (engine.measurements.timing.TimingResult) in words: the CLI's rows of `bench`, and the facts the timing
pane says on its lines (the percentiles' intervals, the shape schedule, torch.compile, peak memory, the host's marks,
torch state notes): the pane's compact lines beside the CLI's rows where the two say a fact in their own form."""

from __future__ import annotations

from torchperf_tui.core.formatting import (budget_text, format_bytes, format_ms, format_number, gbs_text,
                                           interval_text, unsupported_mark)
from torchperf_tui.wording import WARNING, Row, row, subject
from torchperf_tui.wording.conditions import conditions_rows, noise_rows
from torchperf_tui.wording.numerics import numerics_rows
from torchperf_tui.core.stats import percentile_intervals


def timing_title(result) -> str:
    """'resnet18 on cpu, input 1x3x224x224 float32 channels_last'."""
    return subject(result) + (" channels_last" if result.channels_last else "")


def step_text(result) -> str:
    """What one timed iteration did."""
    if getattr(result, "step", "infer") == "infer":
        return "inference (forward pass)"
    return f"training: forward, loss ({result.loss}), backward, {result.optimizer} step"


def peak_value(result) -> str | None:
    """A CUDA training run: the allocator's peak over its steps beside one forward pass's alone; None without."""
    if getattr(result, "step_peak_bytes", None) is None:
        return None
    return (f"training step {format_bytes(result.step_peak_bytes)} · forward pass alone "
            f"{format_bytes(result.forward_peak_bytes)}")


def state_rows(result) -> list[Row]:
    """What the model's code changed in torch's global state during the run (put back since)."""
    return [row("torch state", note, WARNING) for note in getattr(result, "state_notes", None) or ()]


def budget_rows(result) -> list[Row]:
    """A run that its time budget stopped early, in the warm-up or the timed iterations: how far it got."""
    stopped = getattr(result, "budget_stopped", False) or getattr(result, "warmup_stopped", False)
    return [row("note", budget_text(result))] if stopped else []


def intervals_by_name(samples_ms) -> dict:
    """The 95 % intervals of p50, p90 and p99 (core.stats.PercentileInterval) by name."""
    return {interval.name: interval for interval in percentile_intervals(samples_ms)}


def percentile_cell(intervals: dict, name: str, value_ms: float, style: str = "") -> str:
    """'6.07 ms', or '14.6 ms?' when the samples cannot support that percentile (the pane's mark in `style`)."""
    interval = intervals.get(name)
    return format_ms(value_ms) + unsupported_mark(interval is None or interval.supported, style)


def outside_bulk_text(bulk) -> str:
    """What a histogram spanning the bulk of the samples (core.stats.Bulk) leaves out: '3 samples
    above 24.91 ms, up to 704 ms'; '' when it shows every sample."""
    def count(n: int) -> str:
        return f"{n} sample{'s' if n != 1 else ''}"

    parts = []
    if bulk.below:
        parts.append(f"{count(bulk.below)} below {format_ms(bulk.low)}, down to {format_ms(bulk.lowest)}")
    if bulk.above:
        parts.append(f"{count(bulk.above)} above {format_ms(bulk.high)}, up to {format_ms(bulk.highest)}")
    return " · ".join(parts)


def intervals_line(intervals: dict) -> str:
    """The pane's line: '95 % CI  p50 4.68-4.73 ms · p90 6.21-7.10 ms · p99? not supported by 50 samples, needs 555'."""
    parts = [f"{name}{unsupported_mark(i.supported)} {interval_text(i)}" for name, i in intervals.items()]
    return "95 % CI  " + " · ".join(parts) if parts else ""


def _percentile_values(result) -> dict[str, str]:
    """The CLI's p50, p90, p99 with their 95 % intervals, or why the samples cannot support them."""
    return {i.name: f"{format_ms(i.value_ms)}  (95 % CI {interval_text(i)})" if i.supported else
            f"{format_ms(i.value_ms)}  ({interval_text(i)}: its 95 % CI reaches the "
            f"{'largest' if i.q > 0.5 else 'smallest'} sample)"
            for i in intervals_by_name(result.samples_ms).values()}


def _stats_rows(result) -> list[Row]:
    s = result.stats
    if s is None:
        return []
    intervals = _percentile_values(result)
    return [row("iterations", s.n), row("mean", format_ms(s.mean_ms)), row("std", format_ms(s.std_ms)),
            row("min", format_ms(s.min_ms)), row("p50", intervals.get("p50", format_ms(s.p50_ms))),
            row("p90", intervals.get("p90", format_ms(s.p90_ms))),
            row("p99", intervals.get("p99", format_ms(s.p99_ms))), row("max", format_ms(s.max_ms)),
            row("IQR", format_ms(s.iqr_ms)),
            row("throughput at p50", format_number(s.fps_at_median, "items/s", digits=1)),
            row("throughput, mean", format_number(s.fps, "items/s", digits=1) + " (items / total time)")]


def _unrepeated(report) -> str:
    return f"{report.unrepeated} shape(s) never repeated"


def _shape_rows(result) -> list[Row]:
    report = result.shape_report
    if result.shapes == "fixed" or report is None:
        return []
    unrepeated = f"; {_unrepeated(report)}, not counted" if report.unrepeated else ""
    return [row("shapes", f"{result.shapes}: {report.distinct} distinct, {report.first_seen} of "
                          f"{len(result.samples_ms)} timed iterations met a new shape (the configured "
                          f"shape was met in the warm-up)"),
            row("p50 first-seen", format_ms(report.first_seen_median_ms)),
            row("p50 repeats", format_ms(report.repeat_median_ms)),
            row("tuning cost", f"{report.tuning_cost_ms:.1f} ms (per shape: first iteration - median of "
                               f"its repeats, summed){unrepeated}")]


def _median(values) -> float | None:
    import statistics  # here, not at import: the timing pane's lines are on the first frame's path

    return statistics.median(values) if values else None


def shapes_line(shapes: str, repeats: list, new: list, report) -> str:
    """The pane's line under a varying schedule: the first-seen iterations against the repeats so far (their
    samples), and once the run is done (`report`) the tuning cost."""
    text = (f"shapes {shapes}: {len(new)} new-shape iteration(s) p50 {format_ms(_median(new))} · "
            f"{len(repeats)} repeat(s) p50 {format_ms(_median(repeats))}")
    if report is not None:
        if report.tuning_cost_ms > 0:
            text += f" · tuning cost {format_ms(report.tuning_cost_ms)}"
        else:  # noise, or a first call that was not slower: not a negative cost
            text += (f" · no tuning cost measured (first-seen iterations were {format_ms(-report.tuning_cost_ms)} "
                     "faster than their repeats, in sum)")
        if report.unrepeated:
            text += f" ({_unrepeated(report)})"
    return text


def _compiled_in(result) -> str:
    return f"compiled in {result.compile_s:.1f} s"


_FAILED = "eager numbers shown"  # a compile that failed: the samples are eager
# The phases of a first call (engine/measurements/compile_cost.CompilePhases), in the order they run.
_PHASES = (("dynamo", "dynamo_s"), ("AOT autograd", "aot_s"), ("inductor", "inductor_s"),
           ("code generation", "codegen_s"), ("the rest", "rest_s"))


def seconds_text(seconds) -> str:
    """'4.22 s', '592 ms', '0' (a phase that did not run)."""
    return "0" if seconds == 0 else format_ms(seconds * 1000.0 if seconds is not None else None)


def phases_text(phases) -> str:
    """'dynamo 385 ms · AOT autograd 164 ms · inductor 229 ms · code generation 3.37 s · the rest 73 ms', with
    ' (autotuning 1.20 s of it)' where torch timed some; or why there are none."""
    if phases.dynamo_s is None:
        return f"no phases: {phases.note}"
    text = " · ".join(f"{label} {seconds_text(getattr(phases, name))}" for label, name in _PHASES)
    return text + (f" (autotuning {seconds_text(phases.autotune_s)} of it)" if phases.autotune_s else "")


def caches_text(phases) -> str:
    """'FX graph cache 1 hit, AOT autograd cache 1 hit' ('' where torch counted neither)."""
    parts = []
    for name, hits, misses in (("FX graph cache", phases.fx_graph_hits, phases.fx_graph_misses),
                               ("AOT autograd cache", phases.aot_hits, phases.aot_misses)):
        counts = [f"{n} {word}{'' if n == 1 else ('es' if word == 'miss' else 's')}"
                  for n, word in ((hits, "hit"), (misses, "miss")) if n]
        if counts:
            parts.append(f"{name} {' '.join(counts)}")
    return ", ".join(parts)


def _warm_missed(cost) -> bool:
    return cost.warm is not None and cost.warm.misses > 0


def cold_start_text(cost) -> str:
    """The cold start: its time, where, its phases and what the caches found."""
    cold = cost.cold
    caches = caches_text(cold)
    return (f"{seconds_text(cold.wall_s)}, an empty cache, in this process: {phases_text(cold)}"
            + (f"; {caches}" if caches else ""))


def warm_start_text(cost) -> str:
    """The warm start: its time, where, its phases, what the caches found, and how long its process took to ready
    torch's compiler before it; or why there is none."""
    warm = cost.warm
    if warm is None:
        return cost.warm_note or "not measured"
    caches = caches_text(warm)
    text = (f"{seconds_text(warm.wall_s)}, a second process, the cache filled: {phases_text(warm)}"
            + (f"; {caches}" if caches else ""))
    if _warm_missed(cost):
        text += f" (it missed the cache {warm.misses} time{'' if warm.misses == 1 else 's'}: compiled again)"
    if warm.ready_s:
        text += (f"; that process first readied torch's compiler ({seconds_text(warm.ready_s)}, in neither start: "
                 "what any new process pays once)")
    return text


def _starts(cost, compact: bool = False) -> str:
    """'cold start 4.22 s · warm start 592 ms' (the warm one '–' where not measured); `compact`: 'cold 4.22 s ·
    warm 592 ms'."""
    warm = seconds_text(cost.warm.wall_s) if cost.warm is not None else "–"
    start = "" if compact else " start"
    return f"cold{start} {seconds_text(cost.compile_s)} · warm{start} {warm}"


def break_even_text(cost) -> str:
    """'after 1,234 calls from a cold start (compile 10.0 s / (eager 0.080 ms - compiled 0.070 ms per call)), 99
    from a warm one (592 ms)', 'never: the compiled model is not faster than eager (compiled 0.114 ms, eager 0.080
    ms)', or why there is none."""
    if cost.break_even_calls is not None:
        text = (f"after {cost.break_even_calls:,} calls from a cold start (compile {seconds_text(cost.compile_s)} / "
                f"(eager {format_ms(cost.eager_median_ms)} - compiled {format_ms(cost.compiled_median_ms)} per call))")
        warm = getattr(cost, "break_even_warm_calls", None)
        if warm is not None:
            text += f", {warm:,} from a warm one ({seconds_text(cost.warm.wall_s)})"
        return text
    if cost.eager_median_ms is not None:
        return (f"{cost.break_even_note} (compiled {format_ms(cost.compiled_median_ms)}, eager "
                f"{format_ms(cost.eager_median_ms)} per call)")
    return f"not known: {cost.break_even_note}"


def _break_even_brief(cost) -> str:
    """The pane's on a short terminal: '1,234 calls cold, 99 warm', 'never', 'not known'."""
    if cost.break_even_calls is not None:
        warm = getattr(cost, "break_even_warm_calls", None)
        return f"{cost.break_even_calls:,} calls cold" + (f", {warm:,} warm" if warm is not None else "")
    return "never" if cost.eager_median_ms is not None else "not known"


def graph_breaks_text(cost, reasons: bool = True) -> str:
    """'0 graph breaks', '2 graph breaks (Failed to trace builtin operator; ...)' (with `reasons`)."""
    if cost.graph_breaks is None:
        return f"graph breaks not counted: {cost.counters_note}"
    text = f"{cost.graph_breaks} graph break{'' if cost.graph_breaks == 1 else 's'}"
    return text + (f" ({'; '.join(cost.break_reasons)})" if reasons and cost.break_reasons else "")


def recompiles_text(cost) -> str:
    """'1 recompile after the first call; 1 timed sample held one, kept out of the statistics'."""
    if cost.recompiles is None:
        return f"recompiles not counted: {cost.counters_note}"
    text = f"{cost.recompiles} recompile{'' if cost.recompiles == 1 else 's'} after the first call"
    if cost.recompiled_samples:
        held = cost.recompiled_samples
        text += f"; {held} timed sample{' held one' if held == 1 else 's held one'}, kept out of the statistics"
    return text


def _level(cost) -> str:
    return WARNING if cost.graph_breaks or cost.recompiles or cost.break_even_calls is None else ""


def _warm_level(cost) -> str:
    """A warm start that was not measured for a reason of its own (skipped, failed), or missed the cache."""
    if cost.warm is None:
        return WARNING if cost.warm_note and not cost.warm_note.startswith("not measured") else ""
    return WARNING if _warm_missed(cost) else ""


def compile_rows(result) -> list[Row]:
    """The CLI's rows: the compile mode and its cold and warm starts apart from the samples (or why it failed, as a
    warning), each start by phase, then what dynamo's counters say, the eager run and the break-even
    (engine/measurements/compile_cost.py)."""
    if result.compile_mode is None:
        return []
    if not result.compiled:
        return [row("torch.compile", f"FAILED, {_FAILED}: {result.compile_error}", WARNING)]
    cost = getattr(result, "compile_cost", None)
    if cost is None or getattr(cost, "cold", None) is None:  # a result from before the starts were measured
        rows = [row("torch.compile", f"mode {result.compile_mode}, {_compiled_in(result)}")]
    else:
        rows = [row("torch.compile", f"mode {result.compile_mode}, {_starts(cost)} (not in the samples)"),
                row("cold start", cold_start_text(cost)),
                row("warm start", warm_start_text(cost), _warm_level(cost))]
    if cost is None:
        return rows
    rows += [row("graph breaks", graph_breaks_text(cost), WARNING if cost.graph_breaks else ""),
             row("recompiles", recompiles_text(cost), WARNING if cost.recompiles else "")]
    if cost.eager_median_ms is not None:
        rows.append(row("eager run", f"p50 {format_ms(cost.eager_median_ms)} ({cost.eager_source})"))
    return rows + [row("break-even", break_even_text(cost), WARNING if cost.break_even_calls is None else "")]


def compile_cost_line(cost) -> str:
    """The pane's line: '0 graph breaks · 0 recompiles after the first call · break-even after 1,234 calls (...)'."""
    return " · ".join([graph_breaks_text(cost, reasons=False), recompiles_text(cost),
                       "break-even " + break_even_text(cost)])


def _compile_brief(cost) -> str:
    """The pane's one line on a short terminal: 'cold 4.22 s · warm 592 ms · break-even 1,234 calls cold, 99 warm',
    with the graph breaks and recompiles where there are some."""
    parts = [_starts(cost, compact=True), "break-even " + _break_even_brief(cost)]
    if cost.graph_breaks:
        parts.append(graph_breaks_text(cost, reasons=False))
    if cost.recompiles:
        parts.append(f"{cost.recompiles} recompile{'' if cost.recompiles == 1 else 's'}")
    return " · ".join(parts)


def compile_line_rows(mode: str | None, result, compact: bool = False) -> list[Row]:
    """The pane's lines of a run under torch.compile `mode`: compiling (no `result` yet); its cold and warm starts
    apart from the samples, each by phase, and what the compile cost and bought, or all that in one line where
    `compact` (a short terminal); or why it failed, as a warning."""
    if mode is None:
        return []
    if result is None:
        return [row(f"torch.compile mode {mode}", "compiling before the timed iterations…")]
    if not result.compiled:
        return [row(f"torch.compile failed, {_FAILED}", str(result.compile_error), WARNING)]
    cost = getattr(result, "compile_cost", None)
    if cost is None or getattr(cost, "cold", None) is None:  # a result from before the starts were measured
        rows = [row(f"torch.compile mode {mode}", f"{_compiled_in(result)} (not in the samples)")]
    elif compact:
        return [row(f"compile {mode}", _compile_brief(cost), _level(cost) or _warm_level(cost))]
    else:
        rows = [row(f"torch.compile mode {mode}", f"{_starts(cost)} (not in the samples)"),
                row("cold start", cold_start_text(cost)),
                row("warm start", warm_start_text(cost), _warm_level(cost))]
    if cost is not None:
        rows.append(row("compile cost", compile_cost_line(cost), _level(cost)))
    return rows


def _small_ms(ms: float) -> str:
    """format_ms, with a copy under a microsecond said as such (not '0 µs')."""
    return "under 1 µs" if ms < 1e-3 else format_ms(ms)


def _small_pct(pct: float) -> str:
    return "under 0.1 %" if pct < 0.05 else f"{pct:.1f} %"


def input_copy_text(copy) -> str:
    """An estimated input copy (engine/hardware/input_copy.InputCopy): '588.0 KiB a pass from the host: pinned
    24 µs, 0.5 % of copy + pass · pageable 61 µs, 1.2 %; from the measured host-to-device ceilings (24.1 GB/s pinned,
    9.8 GB/s pageable), not timed in the run'; or why there is none."""
    if copy.missing:
        return f"not estimated: {copy.missing}"
    parts, rates = [], []
    for memory, ms, pct, rate in (("pinned", copy.pinned_ms, copy.pinned_pct, copy.pinned_bytes_per_s),
                                  ("pageable", copy.pageable_ms, copy.pageable_pct, copy.pageable_bytes_per_s)):
        if ms is not None:
            share = _small_pct(pct) + (" of copy + pass" if not parts else "")
            parts.append(f"{memory} {_small_ms(ms)}, {share}")
            rates.append(f"{gbs_text(rate / 1e9)} {memory}")
    return (f"{format_bytes(copy.bytes)} a pass from the host: {' · '.join(parts)}; from the measured host-to-device "
            f"ceilings ({', '.join(rates)}), not timed in the run")


def input_copy_brief(copy) -> str:
    """input_copy_text on a short terminal: '588.0 KiB a pass from the host: pinned 0.5 %, pageable 1.2 % of copy +
    pass (estimated)', or 'not estimated' and the reason's head."""
    if copy.missing:
        return f"not estimated: {copy.missing.split(':')[0]}"
    shares = [f"{memory} {_small_pct(pct)}" for memory, pct in (("pinned", copy.pinned_pct),
                                                                 ("pageable", copy.pageable_pct)) if pct is not None]
    return f"{format_bytes(copy.bytes)} a pass from the host: {', '.join(shares)} of copy + pass (estimated)"


def input_copy_rows(result) -> list[Row]:
    """A GPU run: what copying its inputs from the host would add to a pass, estimated (nothing on a CPU, where they
    are in the host's memory already)."""
    copy = getattr(result, "input_copy", None)
    return [] if copy is None else [row("input copy (estimate)", input_copy_text(copy))]


def timing_rows(result) -> list[Row]:
    """`bench`: what was run and how, the statistics, the shape schedule, the GPU over the run, the host, and
    every note on the numbers."""
    step = getattr(result, "step", "infer")
    rows = [row("step", step_text(result))]
    if getattr(result, "amp", None):
        rows.append(row("mixed precision", f"torch.autocast {result.amp}"
                        + (" with a gradient scaler" if step == "train" and result.amp == "fp16" else "")))
    attn = getattr(getattr(result, "config", None), "attn", None)
    if attn:
        rows.append(row("attention", f"{attn} (transformers' attn_implementation)"))
    rows += numerics_rows(result)
    rows += [row("flags", result.flags_text()), row("timer", result.timer),
             row("first iteration", format_ms(result.first_iter_ms)),
             row("warm-up", f"{len(result.warmup_ms)} iterations")]
    if step == "train":
        peak = peak_value(result)
        rows.append(row("peak memory", f"{peak} (allocated: weights, activations kept for the backward, gradients, "
                        "optimizer state)" if peak is not None else
                        "n/a on the CPU (no allocator statistics; the memory trace has the process RSS)"))
    rows += compile_rows(result) + _stats_rows(result) + input_copy_rows(result) + _shape_rows(result)
    rows += conditions_rows(getattr(result, "conditions", None), step)
    rows += noise_rows(result) + budget_rows(result)
    if result.cancelled:
        rows.append(row("note", "cancelled before the end"))
    return rows + state_rows(result)
