"""The history records a finished measurement makes: one for a timing run or a generation, one per arm for an A/B."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from torchperf_tui.engine.records.generation_record import record_from_generation
from torchperf_tui.engine.records.history_records import HistoryRecord, record_from_timing, records_from_ab
from torchperf_tui.engine.records.why_record import record_from_advice

if TYPE_CHECKING:
    from torchperf_tui.engine.measurements.abtest import ABResult
    from torchperf_tui.engine.measurements.timing import TimingResult


def records_of(result: "TimingResult | ABResult", fingerprint: dict[str, Any] | None = None) -> list[HistoryRecord]:
    """The history records of a finished measurement: one for a timing run, one per arm for an A/B.
    `fingerprint`: the environment as the process that measured saw it (None: take it here, with torch)."""
    if hasattr(result, "findings"):  # a `why` result (engine/analysis/advice_result.Advice)
        return [record_from_advice(result, fingerprint)]
    if hasattr(result, "verdict"):  # an ABResult (imported by name only: it would import torch)
        return records_from_ab(result, fingerprint)
    if hasattr(result, "decode_ms"):  # a GenerationResult
        return [record_from_generation(result, fingerprint)]
    return [record_from_timing(result, fingerprint)]
