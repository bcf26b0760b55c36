"""The timing modes side by side (engine.measurements.timing_modes.ModesResult) in words: a row per mode for the CLI's
table and the timing pane's line, the gaps between them, why a mode could not run, and each mode's marks (a busy
host or a noisy spread over its samples, as a run's)."""

from __future__ import annotations

from torchperf_tui.core.formatting import format_ms, format_shape
from torchperf_tui.wording import WARNING, Row, row, subject
from torchperf_tui.wording.conditions import disturbed_text, noise_rows, point_mark
from torchperf_tui.core.marks import disturbance_marks

NO_FIGURE = "–"


def modes_title(result) -> str:
    """The CLI's heading: what was measured, under which flags, in how many rounds."""
    return (f"{subject(result)}, "
            f"{result.step}, flags {result.flags.describe(device=result.device)}: timing modes in "
            f"{result.rounds} interleaved rounds")


def modes_head(result, flags_text: str) -> str:
    """The pane's first line: what was measured."""
    return (f"timing modes of {result.model} {format_shape(result.input_shape)} {result.dtype} · {result.step} · "
            f"{flags_text}")


def mode_cells(result) -> list[tuple[str, str, str, str, str, str]]:
    """Per mode: (mode, median, p90, mean, samples, what it measures); a mode that could not run has its reason
    where the meaning stands, one cancelled before a sample says so."""
    # numpy: the panes load the wording before the app's first frame
    from torchperf_tui.engine.measurements.timing_modes import MEANING

    cells = []
    for mode in result.modes:
        s = mode.stats
        if mode.unavailable is not None:
            cells.append((mode.mode, NO_FIGURE, NO_FIGURE, NO_FIGURE, "0", f"n/a: {mode.unavailable}"))
        elif s is None:
            cells.append((mode.mode, NO_FIGURE, NO_FIGURE, NO_FIGURE, "0", "no samples (cancelled)"))
        else:
            mark = point_mark(mode)
            cells.append((mode.mode, format_ms(s.p50_ms), format_ms(s.p90_ms), format_ms(s.mean_ms), str(s.n),
                          (f"({mark}) " if mark else "") + MEANING[mode.mode]
                          + (f" (blocks of {result.per_block}; a sample is a block's time per iteration)"
                             if mode.mode == "pipelined" else "")))
    return cells


def medians_text(result) -> str:
    """The pane's line of medians: 'sync p50 6.1 ms · pipelined p50 5.2 ms (blocks of 10) · graph n/a'."""
    parts = []
    for mode in result.modes:
        if mode.unavailable is not None:
            parts.append(f"{mode.mode} n/a")
        elif mode.stats is None:
            parts.append(f"{mode.mode} {NO_FIGURE}")
        else:
            unit = f" (blocks of {result.per_block})" if mode.mode == "pipelined" else ""
            mark = point_mark(mode)
            parts.append(f"{mode.mode} p50 {format_ms(mode.stats.p50_ms)}{unit}" + (f" ({mark})" if mark else ""))
    return " · ".join(parts) + (" · cancelled" if result.cancelled else "")


def unavailable_rows(result) -> list[Row]:
    """Why each mode that could not run could not."""
    return [row(mode.mode, mode.unavailable, WARNING) for mode in result.modes if mode.unavailable is not None]


def modes_rows(result) -> list[Row]:
    """The CLI's rows under the table: the host over the rounds, then a warning per mark (each mode's, named)."""
    return noise_rows(result)


def modes_marks_text(result, compact: bool = False) -> str:
    """The pane's line of marks: 'disturbed: sync: noisy host: ...' ('' when none; `compact`: the heads alone)."""
    marks = disturbance_marks(result)
    return disturbed_text(marks, compact)


def modes_full_text(result, flags_text: str) -> str:
    """All of it, for the pane's tooltip: what was measured, the medians, the gaps, why a mode is n/a, the marks."""
    why_not = [f"{label}: {value}" for label, value, _ in unavailable_rows(result)]
    marks = modes_marks_text(result)
    return "\n".join([modes_head(result, flags_text), medians_text(result), *result.findings, *why_not,
                      *([marks] if marks else [])])
