"""How numbers read to a person: bytes, counts, FLOPs, milliseconds. Shared by the CLI and the TUI.

No torch import here: the TUI formats before the engine is loaded. Unavailable values (the engine's NA,
or None) pass through as their own text.
"""

from __future__ import annotations

import math

from torchperf_tui.core.stats import percentile_supported

_BYTE_UNITS = (("TiB", 1024**4), ("GiB", 1024**3), ("MiB", 1024**2), ("KiB", 1024))


def is_number(value) -> bool:
    """A real number to format or compare: an int or a float, not a bool (nor an engine NA, nor None)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def is_positive_number(value) -> bool:
    """A number a ratio can divide by or a peak can be: finite and above zero."""
    return is_number(value) and math.isfinite(value) and value > 0


def number_text(value, spec: str, unit: str = "", na: str | None = None) -> str:
    """A number in its format with its unit ('12.3 ms'); anything else as `na` when given, else "n/a" for None
    and an engine NA as its own text ('n/a (reason)')."""
    if is_number(value):
        return f"{value:{spec}}{unit}"
    if na is not None:
        return na
    return "n/a" if value is None else str(value)


def _unavailable(value) -> str | None:
    if value is None:
        return "n/a"
    if isinstance(value, (int, float)):
        return None
    return str(value)  # engine.hardware.nvml.NA renders as "n/a (reason)"


def format_shape(shape) -> str:
    """(1, 3, 224, 224) -> '1x3x224x224': the one way a shape is written, in the CLI, the app and the engine."""
    return "x".join(str(d) for d in shape)


def format_bytes(value, like=None) -> str:
    """1288490188 -> '1.2 GiB'. `like` picks the unit from another value, so a before/after pair reads in
    one unit ('1.2 GiB -> 0.8 GiB', not '1.2 GiB -> 819.2 MiB')."""
    text = _unavailable(value)
    if text is not None:
        return text
    scale = abs(float(value if like is None or _unavailable(like) else like))
    for unit, size in _BYTE_UNITS:
        if scale >= size:
            return f"{float(value) / size:.1f} {unit}"
    return f"{float(value):.0f} B"


def gbs_text(gbs) -> str:
    """'12.3 GB/s' (10^9 bytes a second), '0.034 GB/s' below one (not '0.0'), 'n/a'."""
    if gbs is None:
        return "n/a"
    return f"{gbs_number(gbs)} GB/s"


def gbs_number(gbs: float) -> str:
    """GB/s without the unit, for a column that names it: '12.3', '0.034' below one (not '0.0')."""
    return f"{gbs:,.1f}" if abs(gbs) >= 1 or gbs == 0 else f"{gbs:.2g}"


def format_count(value, unit: str = "") -> str:
    """11_689_512 -> '11.7 M'; with a unit, 1.82e9 -> '1.82 GFLOPs'. Three significant figures."""
    text = _unavailable(value)
    if text is not None:
        return text
    v = float(value)
    prefix = ""
    for threshold, symbol in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(v) >= threshold:
            v, prefix = v / threshold, symbol
            break
    precision = 0 if not prefix else (2 if abs(v) < 10 else 1)
    number = f"{v:.{precision}f}"
    if prefix:
        return f"{number} {prefix}{unit}"
    return f"{number} {unit}" if unit else number


def format_flops(value) -> str:
    """3.64e9 -> '3.64 GFLOPs'."""
    return format_count(value, "FLOPs")


def format_ms(value) -> str:
    """Milliseconds to three significant figures: '130 ms', '58.09 ms', '250 µs', '2.50 s'."""
    text = _unavailable(value)
    if text is not None:
        return text
    v = float(value)
    if v < 0:  # a difference can be negative: its unit is chosen by its size, as for a positive one
        return "-" + format_ms(-v)
    if v >= 1000:
        return f"{v / 1000:.2f} s"
    if v >= 100:
        return f"{v:.0f} ms"
    if v >= 1:
        return f"{v:.2f} ms"
    return f"{v * 1000:.0f} µs"


def format_energy(joules) -> str:
    """Joules to three significant figures: '0.213 J' reads worse than '213 mJ'; '1.52 J', '48.1 µJ'."""
    text = _unavailable(joules)
    if text is not None:
        return text
    v = float(f"{float(joules):.3g}")  # rounded first, so 0.9999 J is '1 J', not '1e+03 mJ'
    if v == 0:
        return "0 J"
    if abs(v) >= 1000:
        return f"{v:,.0f} J"
    for scale, unit in ((1.0, "J"), (1e-3, "mJ"), (1e-6, "µJ")):
        if abs(v) >= scale:
            return f"{v / scale:.3g} {unit}"
    return f"{v / 1e-9:.3g} nJ"


UNSUPPORTED_MARK = "?"
UNSUPPORTED_LEGEND = ("? = more than the sample can support: its 95 % CI reaches the largest (or smallest) sample "
                      "(p50 needs 9 samples, p90 54, p99 555)")
COMPACT_UNSUPPORTED = "? too few samples"  # the same on a narrow pane (the Help says it whole)


def unsupported_mark(supported: bool, style: str = "") -> str:
    """The one mark of a percentile the samples cannot support: '' when they support it, else '?' (in `style`,
    markup such as '$warning', where the text is markup)."""
    if supported:
        return ""
    return f"[{style}]{UNSUPPORTED_MARK}[/]" if style else UNSUPPORTED_MARK


def format_percentile(value_ms, q: float, n: int) -> str:
    """A percentile in ms, marked '?' when `n` samples cannot support it (core.stats.percentile_supported)."""
    return format_ms(value_ms) + unsupported_mark(not isinstance(n, int) or percentile_supported(q, n))


def format_number(value, unit: str = "", digits: int = 0) -> str:
    """A plain number with an optional unit: format_number(71.4, '°C') -> '71 °C'."""
    text = _unavailable(value)
    if text is not None:
        return text
    return f"{float(value):.{digits}f}{(' ' + unit) if unit else ''}"


def shorten_parts(parts: list[str], need: int) -> tuple[list[str], int]:
    """Take up to `need` characters off `parts` (a path's parts but its last) by eliding the middle of their
    words, leftmost first, each down to its first three letters at most: 'layer1' -> 'lay…1' keeps the word's
    start and its number (which stage), and block indices ('0') stay whole. -> (the parts, what is still to take off)."""
    import re

    out = list(parts)
    for i, part in enumerate(out):
        if need <= 0:
            break
        match = re.fullmatch(r"(.*?)(\d*)", part)
        word, digits = match.group(1), match.group(2)
        if len(word) < 5:
            continue
        keep = max(3, len(word) - need - 1)  # the word's start, enough to read; "…" takes one character
        saved = len(word) - keep - 1
        if saved > 0:
            out[i] = word[:keep] + "…" + digits
            need -= saved
    return out, need


def fit_name(name: str, width: int) -> str:
    """A dotted layer path in `width` characters. The leaf says which layer it is and the block indices where
    it sits, so those stay whole: the words before the leaf are elided in their middle first ('lay…1.0.conv1'),
    and a path that still does not fit is cut from the left, keeping its end ('…e_excitation.fc1')."""
    if len(name) <= width:
        return name
    parts = name.split(".")
    head, need = shorten_parts(parts[:-1], len(name) - width)
    text = ".".join([*head, parts[-1]])
    return text if need <= 0 and len(text) <= width else "…" + name[len(name) - width + 1:].lstrip(".")


def interval_text(interval) -> str:
    """A stats.PercentileInterval: '6.05-6.14 ms' (its 95 % CI), or why the sample cannot support it."""
    if not interval.supported:
        return f"not supported by {interval.n} samples, needs {interval.needed}"
    return f"{format_ms(interval.low_ms)}-{format_ms(interval.high_ms)}"


def budget_text(result) -> str:
    """A timing run that its time budget stopped early (in the warm-up, or the timed iterations): how far it got,
    and what that costs."""
    timed = f"{len(result.samples_ms)} of {result.iters_asked} timed iterations"
    if getattr(result, "warmup_stopped", False):
        warm = warmup_budget_text(result.time_budget_s, len(result.warmup_ms), getattr(result, "warmup_asked", None))
        return f"{warm}; then {timed} ran: the percentiles these samples cannot support are marked"
    return (f"stopped at the {result.time_budget_s:g} s time budget after {timed}: the percentiles these samples "
            "cannot support are marked")



def warmup_budget_text(budget_s: float, done: int, asked: int | str | None) -> str:
    """A warm-up that the time budget ended: 'the 2 s time budget ran out in the warm-up, after 40 of 1000 warm-up
    iterations: the model may not have settled'."""
    warm = f"{done} warm-up iterations (auto: not yet settled)" if asked == "auto" else f"{done} of {asked} warm-up iterations"
    return f"the {budget_s:g} s time budget ran out in the warm-up, after {warm}: the model may not have settled"


def printable(text, limit: int | None = None, *, json: bool = False) -> str:
    """`text` with every character a terminal acts on rather than shows (ESC and the other control characters, a
    newline, the line and paragraph separators, bidirectional overrides) written as its escape: 'a\\x1b[2Jb' for
    'a<ESC>[2Jb', so a string read from a file (a history travels as a CI artifact) can neither drive the terminal nor
    break a line or a table row. `json`: JSON's escape ('\\u001b') for a JSON text's strings, which keep their value
    when parsed back (a JSON text's only other non-printable characters are the newlines between its values, kept).
    `limit`: cut to that many characters, the last one '…'. The one helper for it: CLI, app and exports alike."""
    text = str(text)
    if not text.isprintable():  # the usual case is one C-speed check
        text = "".join(ch if ch.isprintable() or (json and ch == "\n") else _escaped(ch, json) for ch in text)
    if limit is not None and len(text) > limit:
        text = text[:max(limit - 1, 0)] + "…"
    return text


def _escaped(ch: str, json: bool) -> str:
    code = ord(ch)
    if json:
        if code > 0xFFFF:  # JSON writes a character beyond the basic plane as its UTF-16 surrogate pair
            code -= 0x10000
            return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"
        return f"\\u{code:04x}"
    return f"\\x{code:02x}" if code <= 0xFF else (f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}")


def compute_rate_text(per_s: float, integer: bool = False, digits: int = 2) -> str:
    """A compute rate: '0.19 TFLOP/s'; `integer`: operations that are not floating-point (int8) in OP/s, in giga
    below a tenth of a tera ('1.3 GOP/s': a CPU without int8 dot products reaches that, which '0.00' would hide)."""
    if integer:
        return f"{per_s / 1e9:.1f} GOP/s" if per_s < 1e11 else f"{per_s / 1e12:.{digits}f} TOP/s"
    tera = per_s / 1e12
    if 0 < abs(tera) < 10 ** -digits:  # '0.0042 TFLOP/s' (a CPU's float8), not '0.00'
        return f"{tera:.2g} TFLOP/s"
    return f"{tera:.{digits}f} TFLOP/s"
