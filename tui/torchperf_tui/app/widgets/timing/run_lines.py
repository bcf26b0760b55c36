"""The timing pane's lines under a run (live or final), in Textual markup: its statistics with the 95 %
intervals, then what the shape schedule, torch.compile, the GPU, torch's state and the host did. The words are
the wording package's (the CLI says the same facts); here they are laid into lines, the levels as colours."""

from __future__ import annotations

import time

from textual.markup import escape

from torchperf_tui.core.formatting import format_ms, format_number
from torchperf_tui.wording.conditions import conditions_line_rows
from torchperf_tui.wording.numerics import numerics_brief, numerics_rows
from torchperf_tui.wording.timing import (budget_rows, compile_line_rows, input_copy_brief, input_copy_rows,
                                          intervals_by_name, intervals_line, peak_value, percentile_cell, shapes_line,
                                          state_rows)


# What the histogram says while a run has no timed sample yet (not "press r": a run is under way).
WAITING_TEXT = {"starting": "building the model: the histogram fills with the timed iterations",
                "cancelling": "cancelling…", "first": "first iteration: the histogram fills with the timed ones",
                "warmup": "warming up: the histogram fills with the timed iterations",
                "cancelled": "cancelled before any timed iteration", "failed": "the run failed: no samples"}
PHASE_TEXT = {"starting": "building model…", "first": "first iteration", "warmup": "warm-up",
              "timed": "timed", "done": "done", "cancelled": "cancelled", "failed": "failed"}
LIVE_STATS_EVERY_S = 0.5  # live statistics over all samples so far are recomputed at most this often
# A CPU run's model shares the cores with this process, and drawing the histogram is most of what a live update
# costs here (two thirds of ~12-17 % of a core at every 0.5 s; bench/results/tui_fidelity.txt): while a CPU run
# measures, the histogram is redrawn at most this often (its lines at each batch, which a CPU run sends once a
# second: measure/runners.py's CPU_SEND_EVERY_S).
LIVE_CPU_HISTOGRAM_EVERY_S = 3.0


def redraw_due(record, now_anyway: bool = False) -> bool:
    """True at most every LIVE_STATS_EVERY_S per run (or when `now_anyway`): when its lines are redrawn."""
    now = time.monotonic()
    if not now_anyway and now - record.stats_at < LIVE_STATS_EVERY_S:
        return False
    record.stats_at = now
    return True


def histogram_due(record, samples) -> bool:
    """At a redraw of the run's lines for a batch of `samples` (a Samples event): whether its histogram is drawn
    too. A CPU run's timed batches draw it at most every LIVE_CPU_HISTOGRAM_EVERY_S, and the last one always."""
    if record.device != "cpu" or samples.phase != "timed" or samples.index >= samples.total - 1:
        return True
    now = time.monotonic()
    if now - record.histogram_at < LIVE_CPU_HISTOGRAM_EVERY_S:
        return False
    record.histogram_at = now
    return True


def finished_text(record) -> str:
    """The notification of a finished run: its median and p99, and the first reason it may be disturbed."""
    return (f"{record.label} {record.model}: median {format_ms(record.stats.p50_ms)}, "
            f"p99 {format_ms(record.stats.p99_ms)}" + (f" · disturbed: {record.disturbed[0]}" if record.disturbed else ""))


def status_line(record) -> str:
    """What the run is doing first (on a short terminal the line is cut at the pane's edge), then what it runs."""
    phase = PHASE_TEXT.get(record.status, record.status)
    where = f"{record.index + 1}/{record.total}" if record.total and not record.finished else ""
    step = f" · {record.step}" if record.step != "infer" else ""
    return (f"run {record.label} · {phase}{' ' + where if where else ''} · {record.model} {record.input_text} "
            f"on {record.device}{step} · {record.flags_text}")


def bar_progress(record, iters: int) -> tuple[int | None, int] | None:
    """(total, progress) of the run's one bar through warm-up then timed iterations; total None: indeterminate
    (animated) only while a run builds; None: the bar as it is."""
    if record.status in ("warmup", "timed") and record.total:
        warm_total = len(record.warmup_ms) if record.status == "timed" else record.total
        timed_total = record.total if record.status == "timed" else iters
        return max(warm_total + timed_total, 1), len(record.warmup_ms) + len(record.samples_ms)
    if record.status == "done":
        total = len(record.warmup_ms) + len(record.samples_ms)
        return max(total, 1), total
    if record.status == "starting":
        return None, 0
    if record.status in ("cancelled", "failed", "cancelling"):
        return 1, 0
    return None


def stats_text(record, compact: bool = False, intervals: dict | None = None) -> str:
    """The stats of a run (live or final), then what the shape schedule and torch.compile did; `compact`
    (a short terminal): the percentiles on one line, the rest on another. A failed run: its error, whole.
    `intervals`: the samples' percentile intervals when the caller has them (intervals_by_name)."""
    s = record.stats
    first = format_ms(record.first_iter_ms) if record.first_iter_ms is not None else "–"
    if record.error:
        text = f"[b $error]error:[/] {escape(record.error)}"
    elif s is None:
        text = f"no timed samples yet · first iteration {first}"
    else:
        intervals = intervals_by_name(record.samples_ms) if intervals is None else intervals
        p50, p90, p99 = (percentile_cell(intervals, name, value, "$warning") for name, value in
                         (("p50", s.p50_ms), ("p90", s.p90_ms), ("p99", s.p99_ms)))
        if compact:
            text = (f"p50 {p50}  p90 {p90}  p99 {p99}\n"
                    f"mean {format_ms(s.mean_ms)}  std {format_ms(s.std_ms)}  FPS "
                    f"{format_number(s.fps_at_median, digits=1)} at p50  n={s.n}  first {first}")
        else:
            text = (f"mean {format_ms(s.mean_ms)}  p50 {p50}  p90 {p90}  p99 {p99}\n"
                    f"std {format_ms(s.std_ms)}  FPS {format_number(s.fps_at_median, digits=1)} at p50 "
                    f"({format_number(s.fps, digits=1)} at the mean)  first {first}  n={s.n}\n"
                    f"{intervals_text(record, intervals)}")
    budget = "\n".join(value for _, value, _ in budget_rows(record.result))
    extra = [line for line in (numerics_text(record, compact), shapes_text(record), compile_text(record, compact),
                               peak_text(record), input_copy_line(record, compact), budget,
                               conditions_text(record, compact), state_text(record),
                               disturbed_text(record, compact)) if line]
    return "\n".join([text, *extra])


def numerics_text(record, compact: bool = False) -> str:
    """A finished run that changes numerics: what its quantization converted and how far its outputs drifted from
    the float32 model (a low or non-finite drift in the warning colour); `compact`: one row of both."""
    result = record.result
    if result is None:
        return ""
    if compact:
        return "  ".join(f"[${level}]{escape(text)}[/]" if level else escape(text)
                         for text, level in numerics_brief(result))
    return "\n".join(f"[b ${level}]{label}:[/] {escape(value)}" if level else f"{label}: {escape(value)}"
                     for label, value, level in numerics_rows(result))


def input_copy_line(record, compact: bool = False) -> str:
    """A finished GPU run: what copying its inputs from the host would add to a pass, estimated from the kept
    transfer ceilings (or why not); `compact`: the shares alone. '' on a CPU."""
    rows = input_copy_rows(record.result) if record.result is not None else []
    if not rows:
        return ""
    label, value, _ = rows[0]
    return f"{label}: {escape(input_copy_brief(record.result.input_copy) if compact else value)}"


def state_text(record) -> str:
    """What the model's code changed in torch's global state during the run (put back since), in the warning
    colour: the numbers were not all measured under the run's flags, or the next model would have paid."""
    return "\n".join(f"[b ${level}]{label}:[/] {escape(value)}" for label, value, level in state_rows(record.result))


def conditions_text(record, compact: bool = False) -> str:
    """A finished CUDA run: the GPU's clocks, temperature, power, energy per item and throttling over its
    timed iterations; throttling in the warning colour, with its reasons and shares unless `compact` (then the
    clocks, energy and the word alone)."""
    return conditions_markup(conditions_line_rows(record.result, record.label, compact))


def conditions_markup(rows) -> str:
    """wording.conditions' line rows in markup: the summary in the warning colour when the GPU throttled, then each
    throttling row in bold warning; '' without rows."""
    if not rows:
        return ""
    (label, value, level), *throttling = rows
    line = f"{label}: {escape(value)}"
    if level:
        line = f"[${level}]{line}[/]"
    return "\n".join([line, *(f"[b ${level}]{escape(value)}[/]" for _, value, level in throttling)])


def disturbed_text(record, compact: bool = False) -> str:
    """A finished run's marks in the warning colour: 'disturbed: window resized during the run; noisy host: load
    3.1 on 2 cores, ...' (what the app saw beside the run, then engine/hardware/host_noise.py's findings); '' when none.
    `compact`: each mark's head alone ('disturbed: noisy host, noisy samples'), one row that leaves the histogram
    its bars; the whole marks are in the tooltip."""
    if not record.disturbed:
        return ""
    if compact:
        return f"[b $warning]disturbed:[/] [$warning]{escape(', '.join(m.split(':')[0] for m in record.disturbed))}[/]"
    return f"[b $warning]disturbed:[/] [$warning]{escape('; '.join(record.disturbed))}[/]"


def stats_and_tooltip(record, compact: bool = False) -> tuple[str, str | None]:
    """stats_text, and its tooltip: the percentiles' intervals (on a short terminal the "?" is explained there)
    and the disturbance marks whole. The intervals are computed once for both, at each live update."""
    intervals = intervals_by_name(record.samples_ms)
    tooltip = "\n".join([line for line in (intervals_text(record, intervals),) if line] + record.disturbed) or None
    return stats_text(record, compact, intervals), tooltip


def intervals_text(record, intervals: dict | None = None) -> str:
    """'95 % CI  p50 4.68-4.73 ms · p90 6.21-7.10 ms · p99? not supported by 50 samples, needs 555'."""
    return intervals_line(intervals_by_name(record.samples_ms) if intervals is None else intervals)


def peak_text(record) -> str:
    """A finished CUDA training run: the allocator's peak over its steps beside one forward pass's alone."""
    peak = peak_value(record.result)
    return "" if peak is None else f"peak allocated: {peak}"


def shapes_text(record) -> str:
    """Under a varying schedule: first-seen iterations against repeats, and the tuning cost when done."""
    if record.shapes == "fixed":
        return ""
    return shapes_line(record.shapes, *record.split_by_shape(), getattr(record.result, "shape_report", None))


def compile_text(record, compact: bool = False) -> str:
    """torch.compile: the cold and warm starts apart from the samples, by phase unless `compact`, and what the compile
    cost and bought; or why it failed (eager numbers shown)."""
    return "\n".join(f"[b ${level}]{label}:[/] {escape(value)}" if level else f"{label}: {escape(value)}"
                     for label, value, level in compile_line_rows(record.compile, record.result, compact))
