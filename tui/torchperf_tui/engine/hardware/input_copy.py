"""What copying one pass's inputs from the host would cost on a GPU: an estimate from the measured host-to-device
ceilings (engine/hardware/ceilings.py), never timed in the run.

A run on a GPU makes its inputs there once and times the model alone; a serving loop gets each request's inputs in
the host's memory and copies them over first. The estimate is the bytes of one pass's inputs over the kept pinned and
pageable host-to-device ceilings, and each copy's share of a pass that includes it: copy / (copy + the run's median).
A ceiling is a large buffer's bandwidth: a few kilobytes of inputs pay a fixed cost a copy (a launch, the driver's
set-up) that the ceiling spreads thin, so a small input's copy is an optimistic floor. On a CPU nothing is said: the
inputs are already in the memory the model computes from.

Plain data (no torch): the app's UI process reads results.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from torchperf_tui.core.errors import TorchperfError
from torchperf_tui.engine.hardware.ceilings import REMEASURE, CeilingsResult, kept_for

NO_CEILINGS = ("no measured host-to-device ceilings kept for this device: measure them (C / torchperf-tui "
               "ceilings)")
NO_TRANSFER = ("the kept ceilings of this device have no host-to-device transfer: " + REMEASURE)


@dataclass
class InputCopy:
    """The input copy of one pass, estimated: its bytes, and over each kept host-to-device ceiling (pinned, pageable)
    the copy's time and its share of copy + pass; or why there is no estimate (`missing`)."""

    bytes: int  # one pass's inputs, as made on the device
    pass_ms: float  # the run's median pass, which the shares are of (with the copy)
    pinned_bytes_per_s: float | None = None  # the kept ceilings it is estimated from
    pageable_bytes_per_s: float | None = None
    pinned_ms: float | None = None
    pageable_ms: float | None = None
    pinned_pct: float | None = None  # copy / (copy + pass), in percent
    pageable_pct: float | None = None
    missing: str | None = None  # why there is no estimate: no ceilings kept, none with the transfers, a corrupt file


def estimate_input_copy(nbytes: int, pass_ms: float, kept: CeilingsResult | None) -> InputCopy:
    """`nbytes` of inputs a pass of `pass_ms` over the host-to-device ceilings in `kept` (a GPU's)."""
    copy = InputCopy(bytes=nbytes, pass_ms=pass_ms)
    if kept is None:
        copy.missing = NO_CEILINGS
        return copy
    pinned, pageable = kept.transfer("h2d", "pinned"), kept.transfer("h2d", "pageable")
    if pinned is None and pageable is None:
        copy.missing = kept.no_transfers or NO_TRANSFER  # kept before the transfers were measured, or none in it
        return copy
    if pinned is not None:
        copy.pinned_bytes_per_s, copy.pinned_ms = pinned.value, nbytes / pinned.value * 1e3
        copy.pinned_pct = 100.0 * copy.pinned_ms / (copy.pinned_ms + pass_ms)
    if pageable is not None:
        copy.pageable_bytes_per_s, copy.pageable_ms = pageable.value, nbytes / pageable.value * 1e3
        copy.pageable_pct = 100.0 * copy.pageable_ms / (copy.pageable_ms + pass_ms)
    return copy


def input_copy_of(result: Any, kept_of: Callable[[str], CeilingsResult | None] | None = None) -> InputCopy | None:
    """The input copy of a timing run on a GPU (its `input_bytes` a pass, against its median), from the ceilings
    `kept_of(device)` reads (by default kept_for: those kept for it); None on a CPU or where the run has no median. A
    ceilings file that cannot be read is the estimate's `missing`, not a failed run."""
    stats, nbytes = getattr(result, "stats", None), getattr(result, "input_bytes", None)
    if not str(result.device).startswith("cuda") or stats is None or nbytes is None:
        return None
    try:
        kept = (kept_of or kept_for)(result.device)
    except TorchperfError as exc:
        return InputCopy(bytes=nbytes, pass_ms=stats.p50_ms, missing=str(exc))
    return estimate_input_copy(nbytes, stats.p50_ms, kept)
