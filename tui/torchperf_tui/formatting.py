"""How numbers read to a person: bytes, counts, FLOPs, milliseconds. Shared by the CLI and the TUI.

No torch import here: the TUI formats before the engine is loaded. Unavailable values (the engine's NA,
or None) pass through as their own text.
"""

from __future__ import annotations

_BYTE_UNITS = (("TiB", 1024**4), ("GiB", 1024**3), ("MiB", 1024**2), ("KiB", 1024))


def _unavailable(value) -> str | None:
    if value is None:
        return "n/a"
    if isinstance(value, (int, float)):
        return None
    return str(value)  # engine.nvml.NA renders as "n/a (reason)"


def format_bytes(value, precision: int = 1, like=None) -> str:
    """1288490188 -> '1.2 GiB'. `like` picks the unit from another value, so a before/after pair reads in
    one unit ('1.2 GiB -> 0.8 GiB', not '1.2 GiB -> 819.2 MiB')."""
    text = _unavailable(value)
    if text is not None:
        return text
    scale = abs(float(value if like is None or _unavailable(like) else like))
    for unit, size in _BYTE_UNITS:
        if scale >= size:
            return f"{float(value) / size:.{precision}f} {unit}"
    return f"{float(value):.0f} B"


def format_count(value, precision: int = 2) -> str:
    """11689512 -> '11.69 M'."""
    text = _unavailable(value)
    if text is not None:
        return text
    v = float(value)
    for threshold, suffix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(v) >= threshold:
            return f"{v / threshold:.{precision}f} {suffix}"
    return f"{v:.0f}"


def format_flops(value, precision: int = 2) -> str:
    """3.6e9 -> '3.60 GFLOPs'."""
    text = _unavailable(value)
    if text is not None:
        return text
    count = format_count(value, precision)
    return f"{count}FLOPs" if count[-1].isalpha() else f"{count} FLOPs"


def format_ms(value, precision: int = 3) -> str:
    text = _unavailable(value)
    if text is not None:
        return text
    v = float(value)
    if v >= 1000:
        return f"{v / 1000:.{precision}f} s"
    if v < 1:
        return f"{v * 1000:.1f} µs"
    return f"{v:.{precision}f} ms"


def format_percent(value, precision: int = 0) -> str:
    text = _unavailable(value)
    if text is not None:
        return text
    return f"{float(value):.{precision}f} %"
