"""A batch search (engine.measurements.throughput.ThroughputResult) in words: the CLI's rows, its table of the batches
that fitted and its line per try, and the facts the throughput pane says on its lines (whether a try fitted, the
best rate and its batch, the largest batch that fits, the rule that stopped the search); and a search under a latency
budget (`--slo`: SloResult) in words: its line per batch, the batch chosen and the frontier's table."""

from __future__ import annotations

from types import SimpleNamespace

from torchperf_tui.core.formatting import format_bytes, format_ms, format_shape, is_number, number_text
from torchperf_tui.engine.measurements.batch_search import best_of
from torchperf_tui.wording import RANDOM_WEIGHTS, Row, model_label, plain, random_weights, row, subject
from torchperf_tui.wording.conditions import CONDITION_MARK, conditions_rows, noise_rows, point_mark


def fits_text(t, marked: bool = True, compact: bool = False) -> str:
    """A BatchTry: 'fits', 'fits · noisy host' (its timed iterations' host or spread marked it; not unless
    `marked`), or 'does not fit: why'. `compact` (the pane's column "fits", in sight at 80 columns): 'yes' ('yes !'
    with a mark: 'yes · noisy host' was cut there) or 'no'; the pane's summary says the marks and why."""
    mark = point_mark(t) if marked and t.fits else ""
    if compact:
        return ("yes" if t.fits else "no") + (f" {CONDITION_MARK}" if mark else "")
    said = "fits" if t.fits else f"does not fit: {t.reason}"
    return f"{said} · {mark}" if mark else said


def try_line(t) -> str:
    """The CLI's line per batch tried, as the search goes: 'batch     4 (grow): fits, 0.891 ms, 4487.1 samples/s
    (0.0 s)', and ' · noisy host' when its timed iterations' host or spread marked it."""
    took = f" ({number_text(t.seconds, '.1f', ' s')})" if t.seconds is not None else ""
    figures = (f", {number_text(t.latency_ms, '.3f', ' ms')}, {number_text(t.samples_per_s, '.1f', ' samples/s')}"
               if t.fits else "")
    mark = point_mark(t)
    return f"batch {t.batch:>5} ({t.phase}): {fits_text(t, marked=False)}{figures}{took}" + (f" · {mark}" if mark else "")


def best_text(result, strong=plain) -> str:
    """'4911.2 samples/s at batch 4', the figures in `strong` (the pane's bold); a search cancelled before its
    best batch was measured again says so, with the best of its short tries."""
    if not result.best_batch:
        tried = best_of(result.points)  # the search's own pick among its tries
        if tried is None:
            return "n/a: cancelled before a batch fitted"
        return ("n/a: cancelled before the best batch was measured again (its tries' best: "
                f"{number_text(tried.samples_per_s, '.1f')} samples/s at batch {tried.batch}, a short try)")
    unit = " samples/s" if is_number(result.samples_per_s) else ""
    return f"{strong(number_text(result.samples_per_s, '.1f'))}{unit} at batch {strong(result.best_batch)}"


def limit_row(result) -> Row:
    """The largest batch that fits, as far as the search knows."""
    return row("largest batch that fits", result.limit_text())


def stopped_by_row(result, strong=plain, escape=plain) -> Row:
    """The rule that stopped the search (in `strong`) and its reason (through `escape`: it can quote an error)."""
    return row("stopped by", f"{strong(result.stop_rule)}: {escape(result.stop_reason)}"
               + (" (--to-oom: no plateau rule)" if result.to_oom else ""))


def throughput_title(result) -> str:
    """'resnet50 on cuda:0, sample 3x224x224 float32'; a model with overrides or other inputs than one float tensor
    as every heading says them (wording.subject), at the batch the search found."""
    if getattr(result, "inputs", ""):
        return subject(SimpleNamespace(model=result.model, device=result.device, dtype=result.dtype,
                                       model_args=result.model_args, seq_len=result.seq_len,
                                       inputs=f"at batch 1, {result.inputs}", input_shape=()))
    title = (f"{model_label(result.model, getattr(result, 'model_args', ''))} on {result.device}, "
             f"sample {format_shape(result.sample_shape)} {result.dtype}")
    return title + (f"; {RANDOM_WEIGHTS}" if random_weights(result.model) else "")


def throughput_rows(result) -> list[Row]:
    """`throughput`: the best samples/s and its batch first, then the largest batch that fits, the rule that stopped
    the search, the time spent, the memory, the notes and the GPU over the measurement."""
    measured = result.measurement
    iters = f" ({measured.iters} iterations; its search try: {number_text(result.best_try_samples_per_s, '.1f')})" \
        if measured is not None and measured.fits else ""
    rows = [row("best throughput", best_text(result) + iters),
            row("latency at that batch", number_text(result.latency_ms, ".3f", " ms")),
            limit_row(result), stopped_by_row(result),
            row("search took", result.time_text()),
            row("memory cap", format_bytes(result.memory_cap_bytes)),
            row("allocator before / after", f"{format_bytes(result.allocator_before_bytes)} / "
                                            f"{format_bytes(result.allocator_after_bytes)}")]
    rows += [row("note", note) for note in result.notes]
    step = getattr(result, "step", "infer")
    rows += conditions_rows(getattr(result, "conditions", None), step,
                            during=f"the measurement at batch {result.best_batch}")
    rows += noise_rows(result)  # the host over the search, then each point's marks
    if step != "infer":
        rows.insert(0, row("each iteration", step if not step.startswith("train") else
                           f"a training step, {step}: the largest batch that fits is the largest that fits for "
                           "training (activations kept for the backward, gradients, optimizer state)"))
    return rows


def point_cells(result) -> list[tuple[str, str, str, str, str]]:
    """The CLI's table of the batches that fitted: (batch, latency, samples/s, try took, 'best' and the try's marks
    ('best, noisy host'), or '')."""
    return [(str(p.batch), number_text(p.latency_ms, ".3f", " ms"), number_text(p.samples_per_s, ".1f"),
             number_text(p.seconds, ".1f", " s"),
             ", ".join(filter(None, ["best" if p.batch == result.best_batch else "", point_mark(p)])))
            for p in result.points]


def _with_median(slo) -> bool:
    """Whether a search under `slo` shows each batch's median beside its quantile: not where the quantile is p50."""
    return slo.q != 0.5


def slo_point_line(point, slo) -> str:
    """'batch 4 (grow): p50 9.10 ms · p99 12.30 ms (CI 11.80 ms-13.00 ms) · 439.6 items/s · goodput 439.6/s ·
    meets'; a batch whose quantile its passes cannot support says '?' after it, as every latency table does; under a
    p50 budget the median once, as the quantile with its interval."""
    if point.quantile is None:
        return f"{point.label}: {point.verdict}" + (f" ({point.reason})" if point.reason else "")
    q = point.quantile
    interval = (f" (CI {format_ms(q.low_ms)}-{format_ms(q.high_ms)})" if q.supported else "?")
    mark = point_mark(point)
    median = f"p50 {format_ms(point.p50_ms)} · " if _with_median(slo) else ""
    return (f"{point.label}: {median}{slo.name} {format_ms(q.value_ms)}{interval} · "
            f"{number_text(point.items_per_s, '.1f', ' items/s')} · goodput "
            f"{number_text(point.goodput_per_s, '.1f', '/s')} · {point.verdict}, {point.n} passes"
            + (f" · {mark}" if mark else ""))


def slo_chosen_text(result) -> str:
    """'batch 8: p99 18.20 ms within 20.00 ms, 439.6 items/s (goodput 436.0/s)', or why there is none."""
    chosen, slo = result.chosen, result.slo
    if chosen is None:
        return ("none: cancelled before a batch met it" if result.cancelled else
                f"none: not even batch 1 meets {slo.text()} ({result.stop_reason})")
    return (f"batch {chosen.batch}: {slo.name} {format_ms(chosen.quantile.value_ms)} within "
            f"{format_ms(slo.budget_ms)}, {number_text(chosen.items_per_s, '.1f', ' items/s')} (goodput "
            f"{number_text(chosen.goodput_per_s, '.1f', '/s')})")


def slo_rows(result) -> list[Row]:
    """`throughput --slo`: the batch chosen first, what ended the search, the time spent, the memory cap and notes,
    then the host's marks."""
    budget = (f"{result.duration_s:.1f} s of the {result.time_budget_s:g} s budget" if result.time_budget_s
              else f"{result.duration_s:.1f} s (no time budget)")
    rows = [row("latency budget", result.slo.text()),
            row("largest batch within it", slo_chosen_text(result)),
            row("stopped", result.stop_reason or "-"),
            row("search took", budget),
            row("memory cap", format_bytes(result.memory_cap_bytes))]
    rows += [row("note", note) for note in result.notes]
    return rows + noise_rows(result)


SLO_LEGEND = "? = the passes cannot support the quantile"


def slo_columns(slo) -> tuple[tuple[str, str], ...]:
    """(key, heading) of each column of a search under a latency budget: the quantile's named by it (p99), after
    the median's (none where the quantile is the median)."""
    return (("batch", "batch"), *((("p50", "p50"),) if _with_median(slo) else ()), ("quantile", slo.name),
            ("items/s", "items/s"), ("goodput/s", "goodput/s"), ("passes", "passes"), ("verdict", "verdict"))


def slo_point_cells(point, slo, chosen: int | None = None) -> tuple[str, ...]:
    """A batch timed under the budget `slo`, in slo_columns' order: the quantile with '?' where its passes cannot
    support it, '–' for what a batch that did not fit has none of, 'chosen' after the verdict of the batch chosen."""
    q = point.quantile
    median = (format_ms(point.p50_ms) if point.p50_ms is not None else "–",) if _with_median(slo) else ()
    return (str(point.batch), *median,
            (format_ms(q.value_ms) + ("" if q.supported else "?")) if q is not None else "–",
            number_text(point.items_per_s, ".1f", na="–"), number_text(point.goodput_per_s, ".1f", na="–"),
            str(point.n), point.verdict + (", chosen" if point.batch == chosen else ""))


def frontier_cells(result) -> list[tuple[str, ...]]:
    """The frontier's table, by batch (slo_point_cells each)."""
    chosen = result.chosen.batch if result.chosen is not None else None
    return [slo_point_cells(p, result.slo, chosen) for p in result.frontier]
