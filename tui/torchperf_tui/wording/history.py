"""A history record (engine.records.history_records.HistoryRecord) in words, once for everything that shows or
exports one: `history`'s line, the app's History rows and the line under them, and the Markdown and CSV exports.
Each row says what kind of run it was (a timing, an arm of an A/B, a generation), when it finished, what its figures
are per (a pass, a training step, a generated token) and under what conditions (disturbed, throttled, cancelled).

Every string of a record comes from a file that may have travelled (a CI artifact): each is made printable here
(formatting.printable) before it is shown or exported. No torch and no Textual here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from torchperf_tui.core.formatting import format_bytes, format_ms, format_percentile, gbs_text, is_number, printable
from torchperf_tui.engine.analysis.advice_result import finding_name
from torchperf_tui.wording import model_label

# What the kinds of record are called, and what one of their samples is.
KIND_WORDS = {"timing": "timing", "ab": "A/B arm", "generate": "generation", "why": "why"}
# A kind this version does not know (a newer one's record): its figures are per timed iteration, whatever that is.
PER_PASS, PER_TRAINING_STEP, PER_TOKEN, PER_ITERATION = "pass", "training step", "token", "iteration"
# The app's compact form of what a row's figures are per (its arm first for an A/B: 'A pass').
COMPACT_PER = {PER_PASS: "pass", PER_TRAINING_STEP: "step", PER_TOKEN: "token", PER_ITERATION: "iter"}
NO_FIGURE = "–"  # a cell whose figure the record does not have (a run cancelled before any timed sample)
FLAGS_COMPACT = 24  # the app's flags cell, in characters: the line under the table has them whole


@dataclass(frozen=True)
class Mark:
    """One condition of a run's figures: `text` whole ('disturbed: window resized during the run', 'GPU throttled
    40 %: power cap (software)'), `short` its name alone ('disturbed', 'GPU throttled')."""

    short: str
    text: str


@dataclass(frozen=True)
class HistoryRow:
    """A record's facts as text, every string printable: `kind` ('timing', 'A/B arm A', 'generation'), `per` (what
    its figures are per: 'pass', 'training step', 'token'), `when` (UTC, to the minute), the model with its overrides,
    the set-up after its input, the figures ('per pass p50 10.00 ms  p99 ...' or a generation's), the flags whole,
    and its marks."""

    when: str
    short_id: str
    kind: str
    arm: str
    per: str
    model: str
    shape: str
    dtype: str
    setup: str
    device: str
    p50: str
    p99: str
    figures: str
    flags: str
    marks: tuple[Mark, ...]

    @property
    def input(self) -> str:
        """'1x3x224x224 float32'."""
        return f"{self.shape} {self.dtype}"

    def compact_per(self) -> str:
        """The app's 'per' cell: 'pass', 'step', 'token', an A/B arm's letter first ('A pass')."""
        per = COMPACT_PER.get(self.per, self.per)
        return f"{self.arm} {per}" if self.arm else per

    def compact_flags(self) -> str:
        """The app's flags cell: the flags in FLAGS_COMPACT characters, cut with '…' (the line under the table has
        them whole), then each mark's name: 'cudnn.benchmark=on, tf32=… (disturbed)'."""
        return printable(self.flags, FLAGS_COMPACT) + "".join(f" ({mark.short})" for mark in self.marks)

    def marks_text(self) -> str:
        """'disturbed: noisy host: ...; GPU throttled 40 %: power cap' ('' when none)."""
        return "; ".join(mark.text for mark in self.marks)


def history_row(record: Any) -> HistoryRow:
    """The record's facts as `history`, the app and the exports word them."""
    details = record.details
    kind = KIND_WORDS.get(record.kind, printable(record.kind, 20))
    arm = printable(details.get("arm"), 3) if record.kind == "ab" and isinstance(details.get("arm"), str) else ""
    if record.kind == "generate":
        per = PER_TOKEN
    elif record.kind not in KIND_WORDS:
        per = PER_ITERATION
    else:
        per = PER_TRAINING_STEP if details.get("step", "infer") == "train" else PER_PASS
    stats = record.stats
    return HistoryRow(
        when=when_text(record.created_at), short_id=printable(record.short_id),
        kind=f"{kind} {arm}" if arm else kind, arm=arm, per=per,
        model=printable(model_label(record.model, details.get("model_args") or "")),
        shape=printable(record.shape_text), dtype=printable(record.dtype), setup=_setup(record),
        device=printable(record.device),
        p50=NO_FIGURE if stats is None else format_percentile(stats.p50_ms, 0.5, stats.n),
        p99=NO_FIGURE if stats is None else format_percentile(stats.p99_ms, 0.99, stats.n),
        figures=_generation_figures(record) if record.kind == "generate" else _figures(record, per)
        + _findings_text(record),
        flags=printable(record.flags_text), marks=marks_of(record))


def when_text(created_at: str) -> str:
    """When a record finished, as every row says it: '2026-11-22 20:30' (UTC, to the minute; printable)."""
    return printable(created_at.replace("T", " ")[:16])


def history_line(record: Any) -> str:
    """`history`'s line of a record (and MLflow's note of a run): '2026-11-22 20:30  a1b2c3d4  timing  resnet18
    1x3x224x224 float32  cpu  per pass p50 10.00 ms  p99 20.00 ms  99.0/s at p50  (n=600)  flags: threads=2 (default)
    [disturbed: noisy host: ...]'."""
    row = history_row(record)
    tail = "".join(f"  [{mark.text}]" for mark in row.marks)
    return (f"{row.when}  {row.short_id}  {row.kind:<10} {row.model}  {row.input}{row.setup}  {row.device}  "
            f"{row.figures}  flags: {row.flags}{tail}")


def history_detail(record: Any) -> str:
    """The app's line under the History table for the highlighted record, before its marks (row.marks_text()): the
    facts of `history`'s line in the order a reader of the row asks for them: 'A/B arm A, finished 2026-11-22 20:30
    UTC (a1b2c3d4) · resnet18 1x3x224x224 float32 on cpu · per pass p50 ... · flags: ...'."""
    row = history_row(record)
    return " · ".join([f"{row.kind}, finished {row.when} UTC ({row.short_id})",
                       f"{row.model} {row.input}{row.setup} on {row.device}", row.figures, f"flags: {row.flags}"])


def marks_of(record: Any) -> tuple[Mark, ...]:
    """What may make the record's figures not the model's alone, in the order `history` gives them."""
    marks = []
    if record.cancelled:
        marks.append(Mark("cancelled", "cancelled"))
    if record.state_notes:
        marks.append(Mark("torch state changed", "torch state changed by the model's code"))
    throttle = record.throttle_text()
    if throttle:
        marks.append(Mark("GPU throttled", f"GPU {printable(throttle)}"))
    if record.disturbed:
        marks.append(Mark("disturbed", f"disturbed: {printable(record.disturbed_text())}"))
    return tuple(marks)


def _setup(record: Any) -> str:
    """What the run did beyond its input: ' channels_last shapes random:16-32 step train (sgd) amp bf16', or a
    generation's ' 64 new tokens after 128'."""
    details = record.details
    text = " channels_last" if record.channels_last else ""
    if details.get("shapes", "fixed") != "fixed":
        text += f" shapes {printable(details['shapes'])}"
    if details.get("step", "infer") != "infer":
        text += f" step {printable(details['step'])} ({printable(details.get('optimizer'))})"
    if details.get("amp"):
        text += f" amp {printable(details['amp'])}"
    if details.get("quant"):
        text += f" quant {printable(details['quant'])}"
    if details.get("attn"):
        text += f" attn {printable(details['attn'])}"
    if record.kind == "generate":
        new, prompt = details.get("new_tokens"), details.get("prompt_len")
        if _finite(new) and _finite(prompt):
            text += f" {new} new tokens after {prompt}"
        if details.get("cache"):
            text += f", cache {printable(details['cache'])}"
    return text


def _findings_text(record: Any) -> str:
    """A `why` record's findings after its figures: ' · findings: threads (confirmed), slow_layer:scale (not run)',
    or ' · no finding above 5 % of the pass'; '' for another kind. Read from a file: checked, not trusted."""
    if record.kind != "why":
        return ""
    found = record.details.get("findings")
    found = [f for f in found if isinstance(f, dict)] if isinstance(found, list) else []
    if not found:
        threshold = record.details.get("threshold_pct")
        return f" · no finding above {threshold:g} % of the pass" if _finite(threshold) else " · no finding"
    return " · findings: " + ", ".join(f"{printable(finding_name(f), 60)} ({printable(f.get('verdict'), 12)})"
                                       for f in found)


def _figures(record: Any, per: str) -> str:
    """'per pass p50 10.00 ms?  p99 20.00 ms?  90.9/s at p50  (n=3)'."""
    stats = record.stats
    if stats is None:
        return "no timed samples"
    at_p50 = stats.fps_at_median  # beside the p50: its rate, not the mean's (items / total time)
    fps = "" if at_p50 is None else f"  {at_p50:,.1f}/s at p50"
    n = stats.n
    return (f"per {per} p50 {format_percentile(stats.p50_ms, 0.5, n)}  p99 {format_percentile(stats.p99_ms, 0.99, n)}"
            f"{fps}  (n={n})")


def _generation_figures(record: Any) -> str:
    """'TTFT 45.2 ms · per token p50 12.3 ms p90 13.1 ms · 81.3 tokens/s · 12.3 GB/s · KV cache 4.5 MiB (n=315)',
    the decode's bandwidth where the record has it. The details are read from a file: numbers are checked, not
    trusted."""
    details = record.details
    ttft = details.get("ttft_stats")
    ttft_ms = ttft.get("p50_ms") if isinstance(ttft, dict) else None
    stats = record.stats
    per_token = ("no decode step" if stats is None
                 else f"per token p50 {format_ms(stats.p50_ms)} p90 {format_ms(stats.p90_ms)}")
    rate = details.get("tokens_per_s")
    rate_text = f"{rate:,.1f} tokens/s" if _finite(rate) else "tokens/s n/a"
    kv = details.get("kv_cache_bytes")
    n = stats.n if stats is not None else 0
    gbs = details.get("bandwidth_gbs")
    bandwidth = f"{gbs_text(gbs)} · " if _finite(gbs) and gbs >= 0 else ""
    return (f"TTFT {format_ms(ttft_ms) if _finite(ttft_ms) else 'n/a'} · {per_token} · {rate_text} · {bandwidth}"
            f"KV cache {format_bytes(kv) if _finite(kv) else 'n/a'}  (n={n})")


def _finite(value: Any) -> bool:
    return is_number(value) and math.isfinite(value)
