"""Readable tables for the headless CLI (rich, plain when piped). Text only: no measurement here."""

from __future__ import annotations

import os
import re
import shutil
import sys
import time

from rich.console import Console
from rich.table import Table
from rich.text import Text

from torchperf_tui.core.stats import percentile_supported
from torchperf_tui.core.formatting import UNSUPPORTED_LEGEND, fit_name, format_bytes, format_count, format_ms
from torchperf_tui.wording import subject
from torchperf_tui.wording.compare import ab_title, arm_cells, arm_conditions
from torchperf_tui.wording.numerics import ab_numerics_rows
from torchperf_tui.wording.kernels import (attention_cells, attention_changed_text, attention_title, changed_text,
                                           fallback_lines, kernel_cells, kernels_title)
from torchperf_tui.wording.modes import mode_cells, modes_rows, modes_title
from torchperf_tui.wording.profile import op_cells, op_columns, profile_rows, profile_title, trace_text
from torchperf_tui.wording.roofline import Footnotes, roofline_rows, roofline_title
from torchperf_tui.wording.throughput import (SLO_LEGEND, frontier_cells, point_cells, slo_columns, slo_rows,
                                             throughput_rows, throughput_title, try_line)
from torchperf_tui.wording.conditions import noise_rows
from torchperf_tui.wording.timing import state_rows, timing_rows, timing_title

# Blanks at the end of a line, before any style codes that close it: Rich pads every cell to its column's width,
# the last column's too, so a table's lines would end in spaces (in a log, a diff, a copied line).
_TRAILING_BLANKS = re.compile(r"[ \t]+((?:\x1b\[[0-9;]*m)*)(?=\n)")


class TrimmedStdout:
    """sys.stdout as it is at each write (tests and callers replace it), each line's trailing blanks taken off."""

    def write(self, text: str) -> int:
        sys.stdout.write(_TRAILING_BLANKS.sub(r"\1", text))
        return len(text)

    def flush(self) -> None:
        sys.stdout.flush()

    def isatty(self) -> bool:
        return sys.stdout.isatty()

    def fileno(self) -> int:
        return sys.stdout.fileno()

    @property
    def encoding(self) -> str:
        return getattr(sys.stdout, "encoding", None) or "utf-8"


def wraps() -> bool:
    """Output goes to a terminal, or COLUMNS says how wide it is: lines wrap at that width."""
    return sys.stdout.isatty() or bool(os.environ.get("COLUMNS"))


# Piped output (scripts, files) gets wide lines instead of rich's 80-column wrapping.
# A pipe gets 200 columns (a log keeps whole lines) unless COLUMNS says how wide to be.
console = Console(file=TrimmedStdout(), highlight=False, width=None if wraps() else 200)


def print_line(line: str) -> None:
    """One line of plain text (never read as markup): wrapped at a terminal's width (or COLUMNS), whole in a pipe,
    where a script or a CI log reads it line by line."""
    console.print(Text(line), soft_wrap=not wraps())


def print_kv(title: str, rows: list[tuple]) -> None:
    """A heading line, then key/value rows aligned in two columns. A value is text, never markup: it can quote an
    error ('call to [/usr/bin/cc] failed'), which Rich would read as a tag (a closing one fails the whole table)."""
    table = Table(show_header=False, box=None, pad_edge=False)
    table.add_column(style="bold")
    table.add_column()
    for key, value, *_ in rows:  # (label, value) or wording's (label, value, level)
        table.add_row(key, Text(str(value)))
    console.print(title, style="bold underline")
    console.print(table)


def render_timing(result) -> None:
    print_kv(timing_title(result), timing_rows(result))


def render_modes(result) -> None:
    """bench --modes: a row per timing mode (median, p90, mean, samples, what it measures), then the gaps."""
    console.print(modes_title(result), style="bold underline")
    table = Table(box=None, header_style="bold")
    for column in ("mode", "median", "p90", "mean", "samples", "what it measures"):
        table.add_column(column, justify="right" if column in ("median", "p90", "mean", "samples") else "left")
    for cells in mode_cells(result):
        table.add_row(*cells)
    console.print(table)
    for line in result.findings:
        console.print(f"- {line}")
    for label, text, _ in modes_rows(result):  # the host over the rounds, then a warning per mode's mark
        console.print(f"{label}: {text}", markup=False)
    if result.cancelled:
        console.print("cancelled before the end: the medians are of the samples taken")


class ProgressLine:
    """A one-line progress counter on stderr while a benchmark runs (only on a terminal), redrawn at most
    ten times a second: a tiny model runs thousands of iterations a second. `show` draws any line in its place
    (a sweep's latest length), and `close` takes it away before the result is printed, so nothing is said twice."""

    PERIOD_S = 0.1

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self._last = ""
        self._drawn_at = 0.0

    def update(self, phase: str, index: int, total: int, ms: float) -> None:
        if not self.enabled:
            return
        now = time.monotonic()
        if now - self._drawn_at < self.PERIOD_S:
            return
        self._drawn_at = now
        of = f"/{total}" if total else ""
        self.show(f"{phase:>7} {index + 1}{of}  {ms:9.3f} ms")

    def show(self, text: str) -> None:
        """`text` in place of the line drawn before, cut to the terminal's width (a wrapped line cannot be drawn
        over)."""
        if not self.enabled:
            return
        text = text[:max(1, shutil.get_terminal_size().columns - 1)]
        if text != self._last:
            sys.stderr.write("\r" + text + " " * max(0, len(self._last) - len(text)))
            sys.stderr.flush()
            self._last = text

    def close(self) -> None:
        if self.enabled and self._last:
            sys.stderr.write("\r" + " " * len(self._last) + "\r")
            sys.stderr.flush()
            self._last = ""


def render_memsnap(result) -> None:
    """`memsnap`: what was recorded, and where the snapshot is (plain lines, as print writes them)."""
    print(f"{subject(result, dtype=False)}: "
          f"{result.iters} iterations recorded, peak allocated {format_bytes(result.peak_allocated_bytes)}, "
          f"{result.entries} allocator events")
    print(f"snapshot: {result.path}" if result.path else "no snapshot written (cancelled)")
    print(result.viewer_hint)


def render_batch_try(t) -> None:
    """One line per batch tried, as the search goes (stderr: stdout keeps the result)."""
    print(try_line(t), file=sys.stderr)


def render_slo(result) -> None:
    """throughput --slo: the batch chosen and what ended the search, then the frontier, batch by batch."""
    print_kv(throughput_title(result), slo_rows(result))
    table = Table(box=None, header_style="bold")
    for key, heading in slo_columns(result.slo):
        table.add_column(heading, justify="left" if key == "verdict" else "right")
    for cells in frontier_cells(result):
        table.add_row(*cells)
    console.print()
    console.print(f"the frontier: every batch timed (goodput: items of the passes within "
                  f"{format_ms(result.slo.budget_ms)}; {SLO_LEGEND})", style="bold underline")
    console.print(table)


def render_throughput(result) -> None:
    """The best samples/s and its batch first, then the largest batch that fits as far as the search knows,
    the rule that stopped it and the time spent; then every batch that fitted, the best one marked."""
    print_kv(throughput_title(result), throughput_rows(result))
    if not result.points:  # a search cancelled before a batch fitted
        return
    table = Table(box=None, header_style="bold")
    for column in ("batch", "latency", "samples/s", "try took", ""):
        table.add_column(column, justify="right" if column else "left")
    for cells in point_cells(result):
        table.add_row(*cells)
    console.print()
    console.print("batches that fit (short tries; the best batch measured again above)", style="bold underline")
    console.print(table)


def render_profile(result, top: int = 20) -> None:
    table = Table(box=None, header_style="bold")
    # CUDA kernel names run to hundreds of characters: cut them, so the numbers stay on screen.
    widths = {"op": 56, "input shapes": 48}
    for column in op_columns(result):
        table.add_column(column, justify="left" if column in widths else "right", no_wrap=True,
                         overflow="ellipsis", max_width=widths.get(column))
    for op in result.top(top):
        table.add_row(*op_cells(result, op))
    print_kv(profile_title(result), profile_rows(result))
    console.print()
    console.print(table)
    if result.trace_path:
        console.print()
        console.print(trace_text(result.trace_path))


def render_roofline(result, layers: bool = False) -> None:
    na = Footnotes()
    print_kv(roofline_title(result), roofline_rows(result, na))
    if layers:
        console.print()
        _render_layer_table(result, na)
    if na.reasons:
        console.print()
        for line in na.lines():
            console.print(line, markup=False)


def _render_layer_table(result, na: Footnotes) -> None:
    """Per layer, longest first when timed: time, share of the pass, achieved FLOP/s, intensity and bound,
    then what no layer owns, so the rows add up to the pass. The layer names get the width the numbers leave."""
    timed = result.layer_times is not None
    training = result.step == "train"
    ordered = (sorted(result.layers, key=lambda l: -l.time_ms if isinstance(l.time_ms, float) else 0.0)
               if timed else result.layers)

    def bound(layer) -> str:
        if hasattr(layer.side, "reason"):
            return na(layer.side)
        pct = layer.roofline_pct
        if getattr(layer, "above_ceiling", None) and timed:  # above 100 %: not a fact, a footnote says why
            return f"{layer.side} >100% {na.mark(layer.above_ceiling)}"
        return f"{layer.side} {pct:.0f}%" if isinstance(pct, float) and timed else layer.side

    # Timed, the bytes give way to the times (--json has them); a training step's are not estimated.
    header = (("time", "% pass") if timed else ()) + ("FLOPs",) + (("FLOP/s",) if timed else ()) + \
        (() if training else (("FLOP/B",) if timed else ("bytes", "FLOP/B"))) + ("bound",)
    cells = []
    for layer in ordered:
        numbers = ([format_ms(layer.time_ms) if timed and not hasattr(layer.time_ms, "reason") else na(layer.time_ms),
                    na(layer.pass_pct, ".1f")] if timed else [])
        numbers.append(format_count(layer.flops))
        if timed:  # a layer that computes nothing the counter counts (a pool, a norm) has no rate: '–'
            numbers.append(format_count(layer.achieved_tflops * 1e12) if isinstance(layer.achieved_tflops, float)
                           else "–" if layer.flops == 0 else na(layer.achieved_tflops))
        if not training:
            numbers += ([] if timed else [format_bytes(layer.bytes)]) + [na(layer.intensity, ".1f")]
        numbers.append(bound(layer))
        cells.append((layer.name, layer.type, numbers))
    outside = list(result.time_outside.items()) if timed else []
    # Whole names first (the start of 'layer3.0.downsample.0' says which block it is): the type column only
    # where the names still fit beside it.
    widths = [max([len(h)] + [len(c[2][i]) for c in cells]) for i, h in enumerate(header)]
    type_width = max([4] + [len(c[1]) for c in cells])
    longest = max([5] + [len(c[0]) for c in cells])
    room = (console.width or 100) - sum(w + 2 for w in widths) - 2
    show_type = room - type_width - 2 >= longest
    name_width = max(12, room - (type_width + 2 if show_type else 0))
    table = Table(box=None, header_style="bold", pad_edge=False)
    table.add_column("layer", no_wrap=True, max_width=name_width)
    if show_type:
        table.add_column("type", no_wrap=True)
    for h in header:
        table.add_column(h, justify="left" if h == "bound" else "right", no_wrap=True)
    for name, kind, numbers in cells:
        table.add_row(fit_name(name, name_width), *([kind] if show_type else []), *numbers)
    title = "per layer" + (", longest first" if timed else "")
    console.print(title, style="bold underline")
    console.print(table)
    if outside:
        console.print("outside the rows", style="bold")
        pass_ms = result.layer_times.pass_ms
        for row, ms in outside:
            pct = f"{100 * ms / pass_ms:5.1f} %" if pass_ms > 0 else "    –"
            console.print(f"  {format_ms(ms):>9} {pct}  {row}", markup=False)
    if not timed:
        console.print("(time per layer: `roofline --layers` profiles the layers; here it was not asked for)")
        return
    _render_time_split(result)


def _render_time_split(result) -> None:
    """What the table's times are, and the profiled pass against the timed median."""
    times = result.layer_times
    accounted = sum(l.time_ms for l in result.layers if isinstance(l.time_ms, float)) + sum(result.time_outside.values())
    overhead = 100.0 * (times.pass_ms / result.latency_ms - 1.0) if result.latency_ms > 0 else 0.0
    console.print(f"pass {format_ms(times.pass_ms)} timed per layer (mean of {times.iters}), the rows add up to "
                  f"{format_ms(accounted)}; the run's median is {format_ms(result.latency_ms)} "
                  f"({abs(overhead):.0f} % {'less' if overhead < 0 else 'more'} per layer)", markup=False)
    if times.gpu is not None:
        console.print(times.gpu.summary(), style="bold", markup=False)
    console.print(f"time: {times.method}", markup=False)


def render_ab(result) -> None:
    """Both arms side by side, then the verdict in one line."""
    table = Table(box=None, header_style="bold")
    numeric = ("median", "95 % CI", "p90", "p99", "blocks")
    for column in ("arm", "spec", "flags", *numeric):
        table.add_column(column, justify="right" if column in numeric else "left")
    for cells in arm_cells(result):
        table.add_row(*cells)
    console.print(ab_title(result), style="bold underline")
    console.print(table)
    if not all(percentile_supported(0.99, len(arm.samples_ms)) for arm in (result.a, result.b)):
        console.print(UNSUPPORTED_LEGEND, style="dim")
    for name, text in arm_conditions(result):
        console.print(f"GPU during {name}'s blocks: {text}")
    console.print()
    console.print(result.summary(), style="bold")
    for label, text, level in ab_numerics_rows(result):
        console.print(f"{label}: {text}", style="yellow" if level else None, markup=False)
    if result.ratio_note():
        console.print(f"note: {result.ratio_note()}")
    for note in result.notes:
        console.print(f"note: {note}")
    # what the model's code changed in torch's state, the host over the blocks, then a warning row per mark
    for label, text, _ in state_rows(result) + noise_rows(result):
        console.print(f"{label}: {text}", markup=False)
    if result.verdict is not None:
        console.print(f"(ratio: median of B/A over {result.verdict.blocks} neighbouring block pairs, with a "
                      "bootstrap 95 % CI; Wilcoxon signed-rank on the paired log-ratios)")


def render_kernels(result) -> None:
    """Per conv layer: what ran under A and under B, with its time per iteration; changed layers marked."""
    columns = ("layer", *(["pass"] if result.training else []), f"A: {result.a_spec}", f"B: {result.b_spec}", "A us",
               "B us", "")
    console.print(kernels_title(result), style="bold underline")
    if result.layers:
        console.print(_kernel_table(columns, kernel_cells(result)))
        console.print(changed_text(result), style="bold")
    if result.attention:  # the attention call sites beside the conv layers, and each fallback with its reason
        console.print(attention_title(result), style="bold")
        console.print(_kernel_table(("site", *columns[1:]), attention_cells(result)))
        console.print(attention_changed_text(result), style="bold")
        for line in fallback_lines(result):
            console.print(line, style="yellow", markup=False)
    console.print(result.note)
    for label, text, _ in noise_rows(result):  # each arm's host over its profiled passes, when it was busy
        console.print(f"{label}: {text}", markup=False)


def _kernel_table(columns, rows) -> Table:
    table = Table(box=None, header_style="bold")
    for column in columns:
        table.add_column(column, justify="right" if column in ("A us", "B us") else "left")
    for cells in rows:
        table.add_row(*cells)
    return table
