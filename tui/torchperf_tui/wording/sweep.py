"""A sequence-length sweep (engine.measurements.sweep.SweepResult) in words: its heading, the CLI's rows, its table of
lengths (an A/B's two arms side by side at each length, with B/A) and the line per point as the sweep goes; the
sweep pane says the same facts through these functions."""

from __future__ import annotations

from torchperf_tui.core.formatting import format_bytes, format_ms, number_text
from torchperf_tui.wording import RANDOM_WEIGHTS, Row, model_label, random_weights, row
from torchperf_tui.wording.conditions import disturbed_text, noise_rows, point_mark
from torchperf_tui.core.marks import disturbance_marks

MEMORY_WORDS = {"cuda-allocator": "peak allocated over the weights (the CUDA allocator's peak)",
                "rss": "peak RSS growth (the process's resident memory, as the batch search measures it)"}


def lengths_text(lengths: list[int]) -> str:
    """'128, 256, 512, 1024'."""
    return ", ".join(str(n) for n in lengths)


def sweep_title(result) -> str:
    """'hf:llama (num_hidden_layers=2) on cpu, float32, batch 1, sequence lengths 128-1024; random weights'."""
    span = f"{result.lengths[0]}-{result.lengths[-1]}" if len(result.lengths) > 1 else str(result.lengths[0])
    text = (f"{model_label(result.model, getattr(result, 'model_args', ''))} on {result.device}, {result.dtype}, "
            f"batch {result.batch}, sequence lengths {span}")
    return text + (f"; {RANDOM_WEIGHTS}" if random_weights(result.model) else "")


def arm_label(name: str, text: str) -> str:
    """'A (sdpa=math)', or the flags of a sweep without arms."""
    return f"{name} ({text})" if name else text


def point_line(point, arms: dict[str, str] | None = None) -> str:
    """The CLI's line per point as the sweep goes: 'length   512 A: 4.21 ms p50, 5.02 ms p90, 121,640 tokens/s,
    peak 12.0 MiB', and ' · noisy host' when its blocks' host or spread marked it."""
    who = f" {point.arm}" if point.arm else ""
    if not point.fits:
        return f"length {point.length:>6}{who}: does not fit: {point.reason}"
    mark = point_mark(point)
    return (f"length {point.length:>6}{who}: {format_ms(point.median_ms)} p50, {format_ms(point.p90_ms)} p90, "
            f"{number_text(point.tokens_per_s, ',.0f', ' tokens/s')}, peak {format_bytes(point.peak_bytes)}"
            + (f" · {mark}" if mark else ""))


def sweep_rows(result) -> list[Row]:
    """What ran, what ended the sweep, how memory was read, the time spent and every note."""
    rows = [row("arm " + name if name else "flags", text) for name, text in result.arms]
    rows += [row("step", result.step), row("lengths", lengths_text(result.lengths) + " (doubling from LO to HI)"),
             row("stopped", result.stop_reason, "warning" if result.cancelled else ""),
             row("peak memory", MEMORY_WORDS.get(result.memory_kind, result.memory_kind))]
    budget = f" of the {result.time_budget_s:g} s budget" if result.time_budget_s else " (no time budget)"
    rows.append(row("took", f"{result.duration_s:.1f} s{budget}"))
    rows += [row("note", note) for note in result.notes]
    rows += [row("torch state", note, "warning") for note in getattr(result, "state_notes", ())]
    if result.ab:
        rows.append(row("A/B", "each length measured for both arms in interleaved blocks (A B B A, then B A A B); "
                               "B/A is the ratio of the medians"))
    return rows + noise_rows(result)  # the host over the sweep, then each length's marks


def sweep_columns(result) -> list[str]:
    """The table's columns: one set per arm, and B/A in an A/B."""
    if not result.ab:
        return ["length", "p50", "p90", "tokens/s", "peak memory"]
    return ["length", "A p50", "B p50", "B/A", "A p90", "B p90", "A tokens/s", "B tokens/s", "A peak", "B peak"]


def _cells(point) -> tuple[str, str, str, str]:
    if point is None:
        return "–", "–", "–", "–"
    if not point.fits:
        return "does not fit", "", "", ""
    return (format_ms(point.median_ms), format_ms(point.p90_ms), number_text(point.tokens_per_s, ",.0f"),
            format_bytes(point.peak_bytes))


def sweep_cells(result) -> list[list[str]]:
    """One row per length measured: p50, p90, tokens/s and peak memory (an arm that did not fit says so; '–' is
    a length it was not run at)."""
    rows = []
    for length in sorted({p.length for p in result.points}):
        if not result.ab:
            rows.append([str(length), *_cells(result.point(length))])
            continue
        a, b = result.point(length, "A"), result.point(length, "B")
        (a50, a90, atok, apeak), (b50, b90, btok, bpeak) = _cells(a), _cells(b)
        ratio = (f"{b.median_ms / a.median_ms:.2f}x" if a is not None and b is not None and a.fits and b.fits
                 and a.median_ms else "")
        rows.append([str(length), a50, b50, ratio, a90, b90, atok, btok, apeak, bpeak])
    return rows


def sweep_marks_text(result, compact: bool = False) -> str:
    """The pane's line of marks: 'disturbed: length 512: noisy host: ...' ('' when none; `compact`: the heads)."""
    return disturbed_text(disturbance_marks(result), compact)


def sweep_summary(result) -> str:
    """One line: each arm's longest length and its peak, and what stopped the sweep (the app's line, the CLI's
    last)."""
    parts = []
    for name, text in result.arms:
        curve = result.curve(name)
        who = f"{name}: " if name else ""
        if curve:
            top = curve[-1]
            parts.append(f"{who}up to {top.length} tokens ({format_ms(top.median_ms)} p50, peak "
                         f"{format_bytes(top.peak_bytes)})")
        else:
            parts.append(f"{who}no length fitted")
    return " · ".join(parts) + f" · stopped: {result.stop_reason}"
