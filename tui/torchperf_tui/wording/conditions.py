"""The conditions a number was measured under, in words: a CUDA run's GPU over its timed iterations
(engine.hardware.run_conditions.RunConditions: clocks, temperature and power, throttling, energy), and the host over
any measurement's windows with every mark on its numbers (engine/hardware/host_noise.py's findings, the app's
disturbances), for a run, an A/B, a throughput search, the timing modes, a sweep, time per layer and generation alike:
the CLI's rows, a pane's line and a point's cell."""

from __future__ import annotations

from torchperf_tui.wording import WARNING, Row, row
from torchperf_tui.core.marks import disturbance_marks


def conditions_rows(conditions, step: str = "infer", during: str = "the run") -> list[Row]:
    """The CLI's rows: the GPU's summary, throttling with its reasons and shares, the energy."""
    if conditions is None:
        return []
    rows = [row(f"GPU during {during}", conditions.summary())]
    if conditions.throttled:
        rows.append(row("throttling", conditions.throttle_text(), WARNING))
    if conditions.gpu_index is not None:
        rows.append(row("energy", conditions.energy_text(step)))
    return rows


def conditions_line_rows(result, label: str, compact: bool = False, where: str = "over run") -> list[Row]:
    """A pane's lines of a finished run (the timing pane's 'GPU over run #3', the throughput pane's 'GPU at batch 4'
    with `where` "at batch"): the short summary (the clocks, energy and the word 'throttled' alone when `compact`),
    then unless `compact` the throttling reasons and shares; warnings when it throttled."""
    conditions = getattr(result, "conditions", None)
    if conditions is None:
        return []
    step = getattr(result, "step", "infer")
    level = WARNING if conditions.throttled_share else ""
    rows = [row(f"GPU {where} {label}", conditions.short(step, brief=compact), level)]
    if conditions.throttled_share and not compact:
        rows.append(row("", conditions.throttle_text(), WARNING))
    return rows


def noise_rows(result) -> list[Row]:
    """The host over the measurement's windows, in figures (engine/hardware/host_noise.py), then one 'warning' row per
    reason its numbers may not be the model's alone (the app's disturbances, the host's findings, per point where it
    has points): the same rows for a run, an A/B, a throughput search, the timing modes, a sweep, a generation."""
    noise = getattr(result, "host_noise", None)
    rows = [row("host", noise.summary())] if noise is not None else []
    marks = disturbance_marks(result)
    return rows + [row("warning", line, WARNING) for line in marks]


def mark_head(mark: str) -> str:
    """A mark cut after its finding: 'batch 4 (grow): noisy host', 'noisy samples', 'window resized during the run'."""
    parts = mark.split(": ")
    for n, part in enumerate(parts):
        if part.startswith("noisy "):
            return ": ".join(parts[:n + 1])
    return parts[0]


# A row of a table has a mark (disturbed, GPU throttled, cancelled): the line under the table says it whole.
CONDITION_MARK = "!"


def disturbed_text(marks, compact: bool = False) -> str:
    """'disturbed: noisy host: load 3.1 on 2 cores, ...; batch 4 (grow): noisy samples: ...' ('' without marks): a
    pane's line under a measurement; `compact`: each mark's head alone ('disturbed: noisy host, batch 4 (grow): noisy
    host'), the whole marks for its tooltip."""
    marks = list(marks or ())
    if not marks:
        return ""
    return "disturbed: " + (", ".join(dict.fromkeys(mark_head(m) for m in marks)) if compact else "; ".join(marks))


def table_marks(marks: str, rows) -> str:
    """The line of marks under a table of points, '! disturbed: …' where one of its `rows` (the points measured) is
    marked '!', so that the line says what the table's marks are; else `marks` as they are."""
    return f"{CONDITION_MARK} {marks}" if marks and any(point_mark(row) for row in rows) else marks


def point_mark(point) -> str:
    """A point's findings in a word or two for its cell or line ('noisy host', 'noisy host, noisy samples'); '' when
    its window was quiet (a BatchTry, a SweepPoint, a ModeResult: anything with a host_noise)."""
    noise = getattr(point, "host_noise", None)
    if noise is None:
        return ""
    return ", ".join(word for word, noisy in (("noisy host", noise.host_noisy), ("noisy samples", noise.samples_noisy))
                     if noisy)
