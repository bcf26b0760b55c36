"""A generation's history record (kind "generate"): the per-token latencies as the record's samples and statistics
(what `history` and Compare read of every record), the time to first token, the prompt, the new tokens, tokens/s, the
KV cache's size, and the bytes a decode step reads with the bandwidth and MBU they make, in its details (worded in
wording/history.py). No torch here (the history is read without it)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from torchperf_tui.engine.records.fingerprint import environment_fingerprint
from torchperf_tui.engine.records.history_records import (HistoryRecord, config_kept, flags_used, iso_utc,
                                                          model_facts, new_record_id, numerics_details)

if TYPE_CHECKING:
    from torchperf_tui.engine.measurements.generation import GenerationResult

KIND = "generate"


def record_from_generation(result: "GenerationResult", fingerprint: dict[str, Any] | None = None) -> "HistoryRecord":
    from dataclasses import asdict

    env = environment_fingerprint(device=result.device) if fingerprint is None else dict(fingerprint)
    ttft = result.ttft_stats
    details: dict[str, Any] = {
        "prompt_len": result.prompt_len, "new_tokens": result.new_tokens, "decode_steps": result.decode_steps,
        "runs": result.runs, "ttft_ms": list(result.ttft_ms), "ttft_stats": asdict(ttft) if ttft else None,
        "tokens_per_s": result.tokens_per_s, "kv_cache_bytes": result.kv_cache_bytes,
        "kv_cache_positions": result.kv_cache_positions, "kv_cache_kind": result.kv_cache_kind,
        "method": result.method, "last_logits_only": result.last_logits_only, "step": "infer",
        **model_facts(result), **numerics_details(result)}
    if result.decode_bytes is not None:  # what a decode step reads, the bandwidth it reached, its share of the ceiling
        ceiling = result.copy_ceiling
        details.update(bytes_per_step=result.bytes_per_step, bandwidth_gbs=result.bandwidth_gbs,
                       mbu_pct=result.mbu_pct, decode_bytes=asdict(result.decode_bytes),
                       copy_ceiling=asdict(ceiling) if ceiling is not None else None)
    if getattr(result, "cache", "dynamic") == "static":  # a static cache and a compiled decode step: not like for like
        details.update(cache="static", compile_ms=result.compile_ms)
    if result.state_notes:
        details["state_notes"] = list(result.state_notes)
    if result.host_noise is not None:
        details["host_noise"] = result.host_noise.to_dict()
    return HistoryRecord(
        id=new_record_id(), kind=KIND, created_at=iso_utc(result.started_at + result.duration_s), model=result.model,
        input_shape=tuple(result.input_shape), dtype=result.dtype, channels_last=False, device=result.device,
        flags=flags_used(result.flags, result.threads_used), flags_text=result.flags_text(),
        stats=result.decode_stats, samples_ms=list(result.decode_ms), fingerprint=env, cancelled=result.cancelled,
        duration_s=result.duration_s, timer=result.timer, details=details, disturbed=list(result.disturbance_marks()),
        config=config_kept(getattr(result, "config", None)))
