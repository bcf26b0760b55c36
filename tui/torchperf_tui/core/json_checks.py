"""Checks of values read back from JSON (a history line, the statistics in it), and the one rule for numbers
written out: a non-finite float becomes null, so every JSON reader (not only Python's) accepts the text.

Standard library only: the history's readers and writers import this without torch or numpy.
"""

from __future__ import annotations

import math
from typing import Any


def is_int(value: Any) -> bool:
    """A whole number, and not a boolean: JSON true is not 1."""
    return isinstance(value, int) and not isinstance(value, bool)


def shown(value: Any) -> str:
    """A value in an error message, cut short: a bad record can hold a megabyte in one field."""
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def finite_float(value: Any, name: str) -> float:
    """`value` as a float if it is a finite number (not a boolean); else ValueError naming `name`."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        try:
            number = float(value)  # an int of 400 digits overflows here
        except OverflowError:
            number = math.inf
        if math.isfinite(number):
            return number
    raise ValueError(f"{name} is not a finite number: {shown(value)}")


def json_type(value: Any) -> str:
    """What a parsed JSON value was, in JSON's words: "array", "string", "number", ..."""
    return {list: "array", str: "string", bool: "boolean", int: "number", float: "number",
            type(None): "null"}.get(type(value), type(value).__name__)


def nonfinite_to_none(value: Any) -> Any:
    """`value` (plain JSON types, nested) with every inf and NaN replaced by None."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: nonfinite_to_none(v) for k, v in value.items()}
    if isinstance(value, list):
        return [nonfinite_to_none(v) for v in value]
    return value
