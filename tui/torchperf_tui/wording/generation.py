"""A generation (engine.measurements.generation.GenerationResult) in words: the CLI's rows of `bench --generate`, and
the lines the app's generation view shows, the same facts in a compact form."""

from __future__ import annotations

from torchperf_tui.core.formatting import format_bytes, format_count, format_ms, format_number, gbs_text
from torchperf_tui.engine.hardware.ceilings import REMEASURE
from torchperf_tui.wording import Row, row, subject
from torchperf_tui.wording.conditions import noise_rows
from torchperf_tui.wording.timing import state_rows

LAST_LOGITS_NOTE = "the prefill computes the last position's logits only (logits_to_keep=1, as model.generate does)"
NO_COPY_CEILING = "no measured copy ceiling: measure it (C / torchperf-tui ceilings)"
READS_COUNT = "every weight once at its dtype + the KV cache the step's attention reads; activations left out"


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
    if getattr(result, "cache", "dynamic") == "static":  # allocated whole at the start, read whole each step
        at_end = f"; {positions} positions held at the end" if positions is not None else ""
        return (f"{format_bytes(result.kv_cache_bytes)} allocated for {result.prompt_len + result.new_tokens} "
                f"positions ({result.kv_cache_kind}){at_end}{why}")
    return f"{format_bytes(result.kv_cache_bytes)} at the end ({result.kv_cache_kind}{held}{why})"


def decode_reads_text(result) -> str:
    """'500.6 MB a step (weights 497.8 MB + KV cache 2.9 MB, the mean of 63 decode steps: the first 498.8 MB at 17
    positions, the last 502.5 MB at 79)'. In powers of 10, the unit of GB/s."""
    reads = result.decode_bytes
    if reads is None:
        return "n/a (no generation completed)"

    def at(positions) -> str:
        return f" at {positions} positions" if positions is not None else ""

    return (f"{decimal_bytes(reads.per_step)} a step (weights {decimal_bytes(reads.weight_bytes)} + KV cache "
            f"{decimal_bytes(reads.kv_mean_bytes)}, the mean of {reads.steps} decode steps: the first "
            f"{decimal_bytes(reads.first_step)}{at(reads.first_positions)}, the last "
            f"{decimal_bytes(reads.last_step)}{at(reads.last_positions)})")


def decimal_bytes(value) -> str:
    """28_137_984 -> '28.1 MB': bytes in powers of 10, as the GB/s they make (a KiB is the cache's unit elsewhere)."""
    return format_count(value, "B")


def above_copy_ceiling_text(pct: float, compact: bool = False) -> str:
    """A bandwidth above the copy ceiling is no fact about the model: the ceiling under it is too low for it."""
    if compact:
        return f"MBU above the copy ceiling ({pct:.0f} %): the weights stayed in cache, or the ceiling is low"
    return (f"above the measured copy ceiling ({pct:.0f} %): a step read faster than a large copy moves bytes "
            f"(weights held in the caches between tokens, or a ceiling too low); {REMEASURE}")


def mbu_text(result, compact: bool = False) -> str:
    """The achieved bandwidth's share of the kept copy ceiling: '45.1 % of the measured copy ceiling, 27.3 GB/s
    (copy 256.0 MiB, 2 threads: bytes read + written per second, against the bytes a step reads)'; above 100 %, why
    it is no figure; without a ceiling, that one is to be measured (and why none could be read)."""
    ceiling, pct = result.copy_ceiling, result.mbu_pct
    if ceiling is None:
        problem = getattr(result, "copy_ceiling_problem", None)
        return NO_COPY_CEILING + (f" ({problem})" if problem and not compact else "")
    if pct is None:
        return "n/a"
    if pct > 100.0:
        return above_copy_ceiling_text(pct, compact)
    if compact:
        return f"MBU {pct:.1f} % of the {gbs_text(ceiling.gbs)} copy ceiling"
    text = (f"{pct:.1f} % of the measured copy ceiling, {gbs_text(ceiling.gbs)} ({ceiling.origin}: the bytes a large "
            "copy reads and writes a second, against the bytes a step reads)")
    return text + (f"; the ceilings were {ceiling.outdated}" if ceiling.outdated else "")


def bandwidth_line(result) -> str | None:
    """The app's line: 'decode reads 28.1 MB/token · 12.3 GB/s · MBU 45.1 % of the 27.3 GB/s copy ceiling', or
    None when no generation completed."""
    if result.decode_bytes is None:
        return None
    return (f"decode reads {decimal_bytes(result.bytes_per_step)}/token · {gbs_text(result.bandwidth_gbs)} · "
            f"{mbu_text(result, compact=True)}")


def compile_text(result) -> str:
    """A static cache's compiled decode step: '12.3 s, the warm-up's first decode step (torch.compile of the step:
    once per process and shape; kept apart)'."""
    ms = result.compile_ms
    if ms is None:
        return "n/a (the warm-up reached no decode step)"
    return (f"{format_ms(ms)}, the warm-up's first decode step (torch.compile of the step, once per process and "
            "shapes; kept apart)")


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
    KV cache, the bytes a decode step reads, the bandwidth they make and its share of the copy ceiling, then the host
    and every note on the numbers."""
    rows = [row("method", result.method)]
    if result.last_logits_only:
        rows.append(row("prefill", LAST_LOGITS_NOTE))
    rows += [row("flags", result.flags_text()), row("timer", result.timer), row("runs", runs_text(result)),
             row("warm-up TTFT", f"{format_ms(result.warmup_ttft_ms)} (kept apart)"),
             *([row("compile", compile_text(result))] if getattr(result, "cache", "dynamic") == "static" else []),
             row("time to first token", ttft_text(result)), row("per-token latency", per_token_text(result)),
             row("tokens/s", tokens_per_s_text(result)), row("KV cache", kv_cache_text(result)),
             row("decode reads", decode_reads_text(result)), row("count", READS_COUNT),
             row("bandwidth", gbs_text(result.bandwidth_gbs) + (" (the bytes a step reads / the per-token median)"
                                                                if result.bandwidth_gbs is not None else "")),
             row("MBU", mbu_text(result))]
    rows += noise_rows(result)
    if result.cancelled:
        rows.append(row("note", "cancelled before the end: the figures are of the runs that completed"))
    return rows + state_rows(result)


def generation_lines(result, compact: bool = False) -> list[str]:
    """The app's lines (plain text: the view escapes them): the figures, the decode's bandwidth, then the method
    (`compact`, a short terminal: without it), then whether it was cancelled and every disturbance mark."""
    stats = result.decode_stats
    per_token = "n/a" if stats is None else f"p50 {format_ms(stats.p50_ms)} p90 {format_ms(stats.p90_ms)}"
    rate = result.tokens_per_s
    figures = (f"TTFT {ttft_text(result)} · per token {per_token} · "
               f"{'n/a' if rate is None else format_number(rate, 'tokens/s', digits=1)} · "
               f"KV cache {format_bytes(result.kv_cache_bytes) if result.kv_cache_bytes is not None else 'n/a'}")
    bandwidth = bandwidth_line(result)
    lines = [figures, *([bandwidth] if bandwidth else [])]
    lines += [] if compact else [f"{result.method}; {runs_text(result)}; {result.flags_text()}"]
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
                        f"{format_number(rate, 'tokens/s', digits=1) if rate else 'n/a'} · "
                        f"{gbs_text(arm.bandwidth_gbs())}"))
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
