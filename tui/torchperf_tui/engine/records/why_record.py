"""A `why` result's history record (kind "why"): the set-up's timing as the record's samples and statistics (what
`history` and Compare read of every record), and its findings with their estimates and verdicts in its details, so
that two of them can say which findings appeared or went away (engine/records/history_compare.py). No torch here."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from torchperf_tui.core.stats import compute_stats
from torchperf_tui.engine.records.fingerprint import environment_fingerprint
from torchperf_tui.engine.records.history_records import (HistoryRecord, config_kept, flags_used, iso_utc,
                                                          model_facts, new_record_id, numerics_details)

if TYPE_CHECKING:
    from torchperf_tui.engine.analysis.advice_result import Advice

KIND = "why"
# What a record keeps of each finding: enough to name it, say its estimate and verdict, and tell it from another.
KEPT = ("key", "what", "layer", "at_stake_ms", "fix", "options", "verdict", "ratio", "ci_low", "ci_high")


def record_from_advice(result: "Advice", fingerprint: dict[str, Any] | None = None) -> HistoryRecord:
    env = environment_fingerprint(device=result.device) if fingerprint is None else dict(fingerprint)
    findings = [{**{name: getattr(finding, name) for name in KEPT}, "share": finding.share,
                 "measured_ms": finding.measured_ms} for finding in result.findings]
    config = result.config
    step = getattr(config, "step", "infer")
    details: dict[str, Any] = {"findings": findings, "threshold_pct": result.threshold_pct, "below": result.below,
                               # what an iteration did, as a timing run's record says it: not like for like otherwise
                               "step": step,
                               "optimizer": getattr(config, "optimizer", None) if step == "train" else None,
                               "amp": getattr(config, "amp", None), **model_facts(result), **numerics_details(result)}
    if result.host_noise is not None:
        details["host_noise"] = result.host_noise.to_dict()
    return HistoryRecord(
        id=new_record_id(), kind=KIND, created_at=iso_utc(time.time()), model=result.model,
        input_shape=tuple(result.input_shape), dtype=result.dtype,
        channels_last=bool(getattr(result.config, "channels_last", False)), device=result.device,
        flags=flags_used(result.flags, result.threads_used) if result.flags is not None else {},
        flags_text=result.flags_text, stats=compute_stats(result.samples_ms) if result.samples_ms else None,
        samples_ms=list(result.samples_ms), fingerprint=env, cancelled=result.cancelled, duration_s=result.duration_s,
        timer="", details=details, disturbed=list(result.disturbance_marks()),
        config=config_kept(getattr(result, "config", None)))
