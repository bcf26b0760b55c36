"""A CUDA run's GPU over its timed iterations (engine.hardware.run_conditions.RunConditions) in words: clocks,
temperature and power, throttling, energy."""

from __future__ import annotations

from torchperf_tui.wording import WARNING, Row, row


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
