"""A generation (engine.measurements.generation.GenerationResult) in words: the CLI's rows of `bench --generate`, and
the lines the app's generation view shows, the same facts in a compact form."""

from __future__ import annotations

from torchperf_tui.core.formatting import format_bytes, format_ms, format_number
from torchperf_tui.wording import Row, row, subject
from torchperf_tui.wording.conditions import noise_rows
from torchperf_tui.wording.timing import state_rows

LAST_LOGITS_NOTE = "the prefill computes the last position's logits only (logits_to_keep=1, as model.generate does)"


def generation_title(result) -> str:
    """'generation: hf:gpt2 on cpu, float32, sequence length 128: input_ids 1x128 ...; random weights'."""
    return f"generation: {subject(result)}"


def _stats_text(stats, missing: str, text) -> str:
    """`text(stats)`, or `missing` when nothing was timed."""
    return missing if stats is None else text(stats)


def ttft_text(result) -> str:
    """'45.2 ms (44.0-47.9 ms over 5 runs)': the median time to first token and its spread."""
    return _stats_text(result.ttft_stats, "no timed run completed", lambda s: f"{format_ms(s.p50_ms)} (" + (
        f"{format_ms(s.min_ms)}-{format_ms(s.max_ms)} over {s.n} runs" if s.n > 1 else "1 run") + ")")


def per_token_text(result) -> str:
    """'median 12.3 ms · p90 13.1 ms over 315 decode steps (63 per run)'."""
    return _stats_text(result.decode_stats, "no decode step timed", lambda s: (
        f"median {format_ms(s.p50_ms)} · p90 {format_ms(s.p90_ms)} over {s.n} decode steps "
        f"({result.decode_steps} per run)"))


def tokens_per_s_text(result) -> str:
    rate = result.tokens_per_s
    if rate is None:
        return "n/a"
    per = f"batch {result.batch} x 1000 / the per-token median" if result.batch > 1 else "1000 / the per-token median"
    return f"{format_number(rate, 'tokens/s', digits=1)} (decode: {per})"


def kv_cache_text(result) -> str:
    """'4.5 MiB (DynamicCache, 191 positions: a 128-token prompt + 64 new tokens - 1)'."""
    if result.kv_cache_bytes is None:
        return "n/a (no generation completed)"
    positions = result.kv_cache_positions
    held = f", {positions} positions" if positions is not None else ""
    expected = result.prompt_len + result.new_tokens - 1
    why = f": the {result.prompt_len}-token prompt + {result.new_tokens} new tokens - 1, the last never fed back" \
        if positions == expected else ""
    return f"{format_bytes(result.kv_cache_bytes)} at the end ({result.kv_cache_kind}{held}{why})"


def runs_text(result) -> str:
    """'3 timed after 1 warm-up generation (5 asked: another, at about 4.1 s like the last, would end past the 10 s
    time budget)'; the warm-up cut short by the budget is said too."""
    warm = "1 warm-up generation"
    if getattr(result, "warmup_stopped", False):
        warm += (f" (cut at the {result.time_budget_s:g} s time budget after {len(result.warmup_decode_ms) + 1} of "
                 f"{result.new_tokens} tokens: the model may not have settled)")
    text = f"{result.runs} timed after {warm}"
    if result.budget_stopped:
        last = getattr(result, "next_run_s", None)
        about = f", at about {last:.1f} s like the last," if last is not None else ""
        text += (f" ({result.runs_asked} asked: another{about} would end past the {result.time_budget_s:g} s time "
                 "budget, so it was not started)")
    elif result.runs < result.runs_asked:
        text += f" ({result.runs_asked} asked)"
    return text


def generation_rows(result) -> list[Row]:
    """`bench --generate`: how it was measured, the time to first token, the time per output token, tokens/s, the
    KV cache, then the host and every note on the numbers."""
    rows = [row("method", result.method)]
    if result.last_logits_only:
        rows.append(row("prefill", LAST_LOGITS_NOTE))
    rows += [row("flags", result.flags_text()), row("timer", result.timer), row("runs", runs_text(result)),
             row("warm-up TTFT", f"{format_ms(result.warmup_ttft_ms)} (kept apart)"),
             row("time to first token", ttft_text(result)), row("per-token latency", per_token_text(result)),
             row("tokens/s", tokens_per_s_text(result)), row("KV cache", kv_cache_text(result))]
    rows += noise_rows(result)
    if result.cancelled:
        rows.append(row("note", "cancelled before the end: the figures are of the runs that completed"))
    return rows + state_rows(result)


def generation_lines(result, compact: bool = False) -> list[str]:
    """The app's lines (plain text: the view escapes them): the figures, then the method (`compact`, a short
    terminal: without it), then whether it was cancelled and every disturbance mark."""
    stats = result.decode_stats
    per_token = "n/a" if stats is None else f"p50 {format_ms(stats.p50_ms)} p90 {format_ms(stats.p90_ms)}"
    rate = result.tokens_per_s
    figures = (f"TTFT {ttft_text(result)} · per token {per_token} · "
               f"{'n/a' if rate is None else format_number(rate, 'tokens/s', digits=1)} · "
               f"KV cache {format_bytes(result.kv_cache_bytes) if result.kv_cache_bytes is not None else 'n/a'}")
    lines = [figures] + ([] if compact else [f"{result.method}; {runs_text(result)}; {result.flags_text()}"])
    if result.cancelled:
        lines.append("cancelled: the figures are of the runs that completed")
    return lines + [line for line in result.disturbance_marks()]


def generation_ab_title(result) -> str:
    return f"generation A/B: {subject(result, dtype=False)}"


def generation_ab_rows(result) -> list[Row]:
    """`compare --generate`: each arm's flags and medians, the verdict on decode, the prefill's apart, the notes."""
    rows = [row("method", result.method), row("timer", result.timer)]
    for name, arm in (("A", result.a), ("B", result.b)):
        rate = result.batch * 1000.0 / arm.per_token_median_ms() if arm.per_token_median_ms() else None
        rows.append(row(f"arm {name}", f"{arm.spec} ({arm.dtype}, {arm.flags_text(result.device)}): TTFT median "
                        f"{format_ms(arm.ttft_median_ms())} · per token median "
                        f"{format_ms(arm.per_token_median_ms())} · "
                        f"{format_number(rate, 'tokens/s', digits=1) if rate else 'n/a'}"))
    rows.append(row("blocks", f"{result.pairs} pairs of one generation per arm, A and B interleaved"
                    + (f" ({result.out_of_time})" if result.out_of_time else "")))
    rows.append(row("decode", result.summary().removeprefix("decode (per output token): ")))
    prefill = result.prefill_verdict
    rows.append(row("prefill (apart)", prefill.summary() + " (time to first token, per block pair)"
                    if prefill is not None else "no verdict"))
    rows += [row("note", note) for note in result.notes]
    if result.cancelled:
        rows.append(row("note", "cancelled before the end: the verdict is of the pairs that completed"))
    return rows + noise_rows(result) + state_rows(result)
