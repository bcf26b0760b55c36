"""Turning engine numbers into short text for the panes; anything not a number (an NA) prints as itself."""

from __future__ import annotations

from numbers import Number
from typing import Any


def _is_num(value: Any) -> bool:
    return isinstance(value, Number) and not isinstance(value, bool)


def fmt_bytes(value: Any) -> str:
    if not _is_num(value):
        return str(value)
    size = float(value)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(size) < 1024 or unit == "TiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} TiB"  # pragma: no cover


def fmt_count(value: Any, unit: str = "") -> str:
    """11_689_512 -> '11.7 M'; with unit 'FLOPs' -> '1.82 GFLOPs'."""
    if not _is_num(value):
        return str(value)
    v = float(value)
    prefixes = ("", "K", "M", "G", "T", "P")
    i = 0
    while abs(v) >= 1000 and i < len(prefixes) - 1:
        v /= 1000
        i += 1
    digits = 0 if i == 0 else (2 if abs(v) < 10 else 1)
    sep = "" if unit else " "
    text = f"{v:.{digits}f} {prefixes[i]}{sep if not prefixes[i] else ''}{unit}".rstrip()
    return text


def fmt_ms(value: Any) -> str:
    if not _is_num(value):
        return str(value)
    v = float(value)
    if v >= 100:
        return f"{v:.0f} ms"
    if v >= 1:
        return f"{v:.2f} ms"
    return f"{v * 1000:.0f} µs"


def fmt_num(value: Any, unit: str = "", digits: int = 0) -> str:
    if not _is_num(value):
        return str(value)
    return f"{float(value):.{digits}f}{(' ' + unit) if unit else ''}"


def one_line_error(exc: BaseException) -> str:
    """TorchperfError carries a one-line user message; anything else shows as 'Type: message'."""
    from torchperf_tui.engine.errors import TorchperfError  # stdlib-only module, cheap

    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    if isinstance(exc, TorchperfError):
        return text or type(exc).__name__
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
