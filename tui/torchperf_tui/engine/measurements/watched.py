"""One measurement under a StateWatch (engine/measurements/flags.py): what the model's code changes in torch's global
state (threads, flags) from its import on is put back at the end, whatever happened, and said in the result's
`state_notes`."""

from __future__ import annotations

from typing import Any, Callable

from torchperf_tui.engine.measurements.flags import StateWatch


def watched(run: Callable[[Any], Any]) -> Any:
    """`run(watch)`'s result, with the notes of what the state watch found and put back."""
    watch = StateWatch()  # before the model's code runs: its import and factory may change global state
    try:
        result = run(watch)
    finally:
        notes = watch.close()  # the state found at the start put back, whatever the model's code did
    result.state_notes = list(notes)
    return result
