"""How one run compares with another: median and p99 ratios, and what differs between the two (flags and
set-up)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Sequence

from torchperf_tui.core.errors import TorchperfError
from torchperf_tui.engine.records.history_records import HistoryRecord
from torchperf_tui.engine.analysis.advice_result import finding_name, findings_change
from torchperf_tui.engine.records.why_record import KIND as WHY
from torchperf_tui.core.formatting import format_ms, printable


@dataclass
class Comparison:
    """Run `candidate` against run `baseline`.

    median_ratio = candidate p50 / baseline p50 (below 1: the candidate is faster);
    speedup_pct = (baseline p50 / candidate p50 - 1) x 100, so +25 % means 1.25x as fast.
    The diffs map a name to (baseline value, candidate value) for what differs between the two runs.
    """

    baseline_id: str
    candidate_id: str
    baseline_p50_ms: float
    candidate_p50_ms: float
    median_ratio: float
    speedup_pct: float
    p99_ratio: float
    flags_diff: dict[str, tuple[Any, Any]]
    setup_diff: dict[str, tuple[Any, Any]]  # model, input, dtype, layout, device, compile mode, shapes
    clock_note: str | None = None  # one run's GPU throttled and the other's did not: the ratio may be the clocks
    disturbance_note: str | None = None  # a run was disturbed or its host noisy: the ratio may be the disturbance
    findings_note: str | None = None  # two `why` records: the findings that appeared and went away

    def summary(self) -> str:
        verdict = (f"{1 / self.median_ratio:.2f}x as fast" if self.median_ratio <= 1
                   else f"{self.median_ratio:.2f}x as slow")
        text = (f"{printable(self.candidate_id[:8])} vs {printable(self.baseline_id[:8])}: {verdict} "
                f"(p50 {format_ms(self.baseline_p50_ms)} -> {format_ms(self.candidate_p50_ms)}, "
                f"speed-up {self.speedup_pct:+.1f} %; p99 ratio {self.p99_ratio:.2f})")
        changed = [f"{printable(name, 40)} {_on_off(a)}->{_on_off(b)}" for name, (a, b) in self.flags_diff.items()]
        text += "; flags: " + (", ".join(changed) if changed else "same")
        if self.setup_diff:
            text += "; not like for like: " + ", ".join(printable(name, 40) for name in self.setup_diff)
        if self.clock_note:
            text += f"; {self.clock_note}"
        if self.disturbance_note:
            text += f"; {self.disturbance_note}"
        if self.findings_note:
            text += f"; {self.findings_note}"
        return text


def _on_off(value: Any) -> str:
    if isinstance(value, bool):
        return "on" if value else "off"
    return "default" if value is None else printable(value, 80)  # read from a file: no escape sequences


def dict_diff(a: dict[str, Any], b: dict[str, Any]) -> dict[str, tuple[Any, Any]]:
    keys = list(a) + [k for k in b if k not in a]
    return {k: (a.get(k), b.get(k)) for k in keys if a.get(k) != b.get(k)}


def compare_records(baseline: HistoryRecord, candidate: HistoryRecord) -> Comparison:
    """How `candidate` compares with `baseline` on median and p99 latency, and what differs between them."""
    for record in (baseline, candidate):
        if record.stats is None or record.stats.p50_ms <= 0:
            raise TorchperfError(f"run {record.short_id} has no timed samples to compare")
    a, b = baseline.stats, candidate.stats
    assert a is not None and b is not None
    return Comparison(
        baseline_id=baseline.id, candidate_id=candidate.id,
        baseline_p50_ms=a.p50_ms, candidate_p50_ms=b.p50_ms,
        median_ratio=b.p50_ms / a.p50_ms,
        speedup_pct=(a.p50_ms / b.p50_ms - 1.0) * 100.0,
        p99_ratio=b.p99_ms / a.p99_ms if a.p99_ms > 0 else math.inf,
        flags_diff=dict_diff(baseline.flags, candidate.flags),
        setup_diff=dict_diff(baseline.setup(), candidate.setup()),
        clock_note=_clock_note(baseline, candidate),
        disturbance_note=disturbance_note(baseline, candidate),
        findings_note=findings_note(baseline, candidate),
    )


def findings_note(baseline: HistoryRecord, candidate: HistoryRecord) -> str | None:
    """Two `why` records: 'findings appeared: threads; went away: attention_math' ('the same findings' when none
    did); None for any other pair. The records are read from a file: names are printable, findings are dicts."""
    if baseline.kind != WHY or candidate.kind != WHY:
        return None

    def names(record: HistoryRecord) -> list[str]:
        found = record.details.get("findings")
        return [printable(finding_name(f), 80) for f in found if isinstance(f, dict)] if isinstance(found, list) else []

    return findings_change(names(baseline), names(candidate))


def _clock_note(baseline: HistoryRecord, candidate: HistoryRecord) -> str | None:
    throttled = [(record, record.throttle_text()) for record in (baseline, candidate)]
    hot = [(record, text) for record, text in throttled if text]
    if len(hot) != 1:  # neither throttled, or both did (then like for like, as far as the record tells)
        return None
    (record, text), = hot
    other = candidate if record is baseline else baseline
    return (f"{record.short_id}'s GPU {text}, {other.short_id}'s did not: part of the ratio may be the clocks, "
            "not what differs between the runs")


def disturbance_note(baseline: HistoryRecord, candidate: HistoryRecord) -> str | None:
    """'a1b2c3d4 was disturbed (window resized during the run): part of the ratio may be the disturbance, ...', or
    None when neither record has a mark. Unlike throttling, two disturbed runs are not like for like: nothing says
    the two disturbances cost the same."""
    return disturbed_sentence([(record.short_id, record.disturbed) for record in (baseline, candidate)])


def disturbed_sentence(runs: Sequence[tuple[str, Sequence[str]]], of: str = "the ratio") -> str | None:
    """The one wording, History, Compare and an A/B's verdict alike, for runs with disturbance marks: 'a1b2c3d4 was
    disturbed (window resized during the run): part of the ratio may be the disturbance, not what differs between
    the runs'. `runs`: (name, marks) pairs, those without a mark left out; `of`: what the disturbance may be part
    of. None when no run has a mark."""
    marked = [(name, marks) for name, marks in runs if marks]
    if not marked:
        return None
    said = " and ".join(f"{name} was disturbed ({'; '.join(marks)})" for name, marks in marked)
    return f"{said}: part of {of} may be the disturbance, not what differs between the runs"
