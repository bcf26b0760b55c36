"""The CUDA memory snapshot (key n on the Memory tab): the caching allocator's history recorded over a few
iterations of the selected model, in the measurement process (engine/measurements/memsnap.py), written where
pytorch.org/memory_viz reads it; and what the user is told of it."""

from __future__ import annotations

from torchperf_tui.measure.protocol import JobFailed
from torchperf_tui.engine.measurements.memsnap import NOT_CUDA


def start_snapshot(pane) -> None:
    """Record the CUDA allocator's history over a few iterations of the selected model, from `pane`'s jobs
    (its "memsnap" slot); a box without CUDA, or no model ready, is told why instead."""
    selection = pane.screen.ready_selection("memory snapshot", module="memsnap")
    if selection is None:
        return
    session = pane.app.session
    if session.device_kind() != "cuda":
        pane.app.notify(NOT_CUDA, title="memory snapshot", severity="warning", timeout=8)
        return
    cfg = pane.jobs.config(selection, lambda error: pane.app.notify(error, title="memsnap failed",
                                                                    severity="error", timeout=8))
    if cfg is None:
        return
    pane.app.notify(f"recording the allocator's history over {selection.model} ({selection.step_text()})…",
                    title="memory snapshot", timeout=3)
    pane.jobs.start("memsnap", {"cfg": cfg},
                    f"recording the allocator's history over {selection.model}")


def snapshot_answered(app, event) -> None:
    """Say where the snapshot went, or why there is none (the job's answer: JobFailed, or its result)."""
    if isinstance(event, JobFailed):
        if event.cancelled:
            app.notify("no snapshot written (cancelled)", title="memory snapshot", severity="warning")
        else:
            app.notify(event.error, title="memsnap failed", severity="error", timeout=8)
    elif event.result.path:
        app.notify(f"snapshot saved to {event.result.path}\n{event.result.viewer_hint}",
                   title="memory snapshot", timeout=12)
    else:
        app.notify("no snapshot written (cancelled)", title="memory snapshot", severity="warning")
