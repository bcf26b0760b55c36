"""A model's overrides as the user types them: `--model-args KEY=VALUE[,KEY=VALUE...]` (and the app's field).

For `hf:` they are settings of the transformers config, for `timm:` and torchvision keyword arguments of the
builder. Parsing here needs no torch: the pairs stay text (`ModelArgs`) until the source that builds the model
checks each key against what it accepts and parses each value (`coerce`) against the setting's default.
"""

from __future__ import annotations

import ast
import difflib
import math
from typing import Any, Iterable

from torchperf_tui.core.errors import ModelError
from torchperf_tui.core.options import MAX_DIM

ModelArgs = tuple[tuple[str, str], ...]
EXAMPLE = "give them like num_hidden_layers=2,hidden_size=256"


def parse_model_args(text: str | None) -> ModelArgs:
    """'a=1,b=[2,3]' -> (('a', '1'), ('b', '[2,3]')); '' -> (). Commas inside brackets or quotes stay in the value."""
    text = (text or "").strip()
    if not text:
        return ()
    pairs: list[tuple[str, str]] = []
    for part in _split_top_level(text):
        key, eq, value = part.partition("=")
        key, value = key.strip(), value.strip()
        if not eq or not key or not value:
            raise ModelError(f"model argument {part.strip()!r} is not KEY=VALUE: {EXAMPLE}")
        if not key.isidentifier():
            raise ModelError(f"model argument {key!r} is not a setting's name: {EXAMPLE}")
        if any(key == k for k, _ in pairs):
            raise ModelError(f"model argument {key!r} is given twice")
        pairs.append((key, value))
    return tuple(pairs)


def _split_top_level(text: str) -> list[str]:
    parts, depth, quote, start = [], 0, "", 0
    for i, ch in enumerate(text):
        if quote:
            quote = "" if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    if any(not p.strip() for p in parts):
        raise ModelError(f"model arguments {text!r} have an empty item: {EXAMPLE}")
    return parts


def format_model_args(args: ModelArgs) -> str:
    """The pairs as typed: 'a=1,b=2' ('' for none)."""
    return ",".join(f"{k}={v}" for k, v in args)


def check_keys(owner: str, args: ModelArgs, accepted: Iterable[str], what: str = "setting") -> None:
    """ModelError, with the closest names, for a key `owner` does not accept (a config takes any keyword silently:
    a typo must not pass as a real setting)."""
    names = sorted(set(accepted))
    for key, _ in args:
        if key not in names:
            close = difflib.get_close_matches(key, names, n=3, cutoff=0.6)
            hint = f"; did you mean {', '.join(close)}?" if close else ""
            raise ModelError(f"{owner} has no {what} {key!r}{hint}")


# Settings that are an index (a token id, a layer's index): 0 is one, whatever the default.
_INDEX_SUFFIXES = ("_id", "_idx", "_index")

_BOOLS = {"true": True, "on": True, "yes": True, "1": True, "false": False, "off": False, "no": False, "0": False}


def coerce(owner: str, key: str, text: str, default: Any) -> Any:
    """`text` as a value of the type of `default`, checked: a bool, a whole number (at least 0, at least 1 where the
    default is, unless the setting is an index: pad_token_id), a finite number (a probability, a name holding 'drop'
    (dropout, drop_path_rate, layerdrop) or '_prob', between 0 and 1), a string, or for a default of None or a list
    a Python literal; a whole number at most MAX_DIM, a normalisation's epsilon above 0. ModelError in one line for anything else."""
    where = f"{owner}: {key}={text}"
    if isinstance(default, bool):
        value = _BOOLS.get(text.strip().lower())
        if value is None:
            raise ModelError(f"{where} is not true or false")
        return value
    if isinstance(default, int):
        value = _number(int, text, f"{where} is not a whole number")
        floor = 1 if default >= 1 and not key.endswith(_INDEX_SUFFIXES) else 0
        if value < floor:
            raise ModelError(f"{where}: it must be at least {floor}")
        _check_whole(where, value)
        return value
    if isinstance(default, float):
        value = _number(float, text, f"{where} is not a number")
        if not math.isfinite(value):
            raise ModelError(f"{where}: it must be a finite number")
        if ("drop" in key or "_prob" in key) and not 0.0 <= value <= 1.0:
            raise ModelError(f"{where}: a probability is between 0 and 1")
        _check_epsilon(where, key, value)
        return value
    if isinstance(default, str):
        return text.strip().strip("'\"")
    return literal(owner, key, text)


def _check_whole(where: str, value: Any) -> None:
    """A whole-number setting is a count or a size (classes, layers, a width, positions): past a 32-bit index no
    tensor can have it as a dimension, and torch fails deep inside ('Storage size calculation overflowed')."""
    if isinstance(value, int) and not isinstance(value, bool) and value > MAX_DIM:
        raise ModelError(f"{where}: it must be at most {MAX_DIM:,}")


def _check_epsilon(where: str, key: str, value: Any) -> None:
    """A normalisation's epsilon (rms_norm_eps, layer_norm_eps, norm_epsilon) is added to a variance before its square
    root: 0 divides by zero on a constant row, below 0 takes the root of a negative. A config class takes either
    silently, so it is refused here."""
    if (key.endswith("eps") or "epsilon" in key) and isinstance(value, (int, float)) and value <= 0:
        raise ModelError(f"{where}: an epsilon must be above 0 (a small positive number such as 1e-6)")


def _number(kind, text: str, error: str):
    try:
        return kind(text)
    except ValueError:
        raise ModelError(error) from None


def literal(owner: str, key: str, text: str) -> Any:
    """A Python literal (a number, True, None, a list, a quoted string), else the text itself as a string."""
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError, RecursionError, MemoryError):
        if text.strip()[:1] in ("[", "(", "{"):  # meant as a list, a tuple or a dict: not passed on as a string
            raise ModelError(f"{owner}: {key}={text[:80]}: not a Python literal; write a list like "
                             "[True,False,False]") from None
        if text.strip().lower() in _BOOLS and not text.strip().isdigit():
            return _BOOLS[text.strip().lower()]
        return text.strip()
    if isinstance(value, float) and not math.isfinite(value):
        raise ModelError(f"{owner}: {key}={text}: it must be a finite number")
    _check_whole(f"{owner}: {key}={text}", value)
    _check_epsilon(f"{owner}: {key}={text}", key, value)
    return value
