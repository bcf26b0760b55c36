"""`history --changes` in words: per set-up, a heading naming it and its records, then each change point on one line
('from a1b2c3d4 (2026-11-22 20:30): 10.00 ms -> 13.00 ms, +30.0 % (95 % CI +28.9 % to +32.0 %); coinciding: torch
2.14.1 -> 2.15.0'), or that there is none, or that the series is too short to tell
(engine/records/change_points.py). Ids, dates and the environment's values come from a file: made printable.
No torch and no Textual here."""

from __future__ import annotations

from torchperf_tui.core.formatting import format_ms, printable
from torchperf_tui.engine.records.change_points import MIN_RECORDS, ChangePoint, Series
from torchperf_tui.wording.baseline import changes_text
from torchperf_tui.wording.history import when_text


def series_heading(series: Series) -> str:
    """'resnet18 1x3x224x224 float32 [defaults] on cuda NVIDIA H100: 40 records, 2026-11-01 09:00 to 2026-12-10
    18:30'."""
    first, last = series.points[0], series.points[-1]
    count = len(series.points)
    span = f", {when_text(first.created_at)} to {when_text(last.created_at)}" if count > 1 else ""
    return f"{series.setup}: {count} record{'' if count == 1 else 's'}{span}"


def change_line(change: ChangePoint) -> str:
    """'from a1b2c3d4 (2026-11-22 20:30): 10.00 ms -> 13.00 ms, +30.0 % (95 % CI +28.9 % to +32.0 %); coinciding:
    torch 2.14.1 -> 2.15.0', the medians those of the records on each side of it."""
    low, high = (change.ci_low - 1.0) * 100.0, (change.ci_high - 1.0) * 100.0
    coinciding = (f"coinciding: {changes_text(change.environment)}" if change.environment
                  else f"no environment difference between {printable(change.previous_id[:8])} and it")
    return (f"from {printable(change.record_id[:8])} ({when_text(change.created_at)}): "
            f"{format_ms(change.before_p50_ms)} -> {format_ms(change.after_p50_ms)}, {change.change_pct:+.1f} % "
            f"(95 % CI {low:+.1f} % to {high:+.1f} %); {coinciding}")


def series_lines(series: Series) -> list[str]:
    """The heading, then each change point, or why there is none, indented under it."""
    count = len(series.points)
    if series.changes is None:
        body = [f"too short to tell: change points need at least {MIN_RECORDS} records"]
    elif not series.changes:
        body = [f"no change point in {count} records"]
    else:
        body = [change_line(change) for change in series.changes]
    return [series_heading(series), *[f"  {line}" for line in body]]


def no_series_line(path) -> str:
    """What `history --changes` says of a history without one record that has a median (empty, or every run
    cancelled)."""
    return f"no run with a timed sample recorded yet ({printable(str(path))})"


def empty_series_lines(setup: str) -> list[str]:
    """History's `v` on a run of a set-up none of whose runs has a median (each cancelled before a timed sample)."""
    return [f"{setup}: no run with a timed sample"]
