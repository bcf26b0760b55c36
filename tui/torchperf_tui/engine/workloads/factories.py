"""A user's own model, `module:factory`: the module imported (from the current folder too), the factory found in it.
The user's code runs here (at import); anything it raises, or a sys.exit, is one line."""

from __future__ import annotations

import contextlib
import difflib
import importlib
import importlib.util
import os
import sys
from typing import Any, Iterator

from torchperf_tui.core.errors import ModelError, first_line
from torchperf_tui.engine.workloads.model_source import PREFIXES, source_of

SPEC_FORMS = "a torchvision name, timm:NAME, hf:TYPE (or hf:DIRECTORY with a config.json), or package.module:factory"


def is_custom(spec: str) -> bool:
    return source_of(spec) == "custom"


def split_custom(spec: str) -> tuple[str, str]:
    module_name, _, factory_name = spec.strip().partition(":")
    if not module_name or not factory_name:
        raise ModelError(f"malformed model {spec!r}: give a torchvision name or package.module:factory")
    return module_name, factory_name


@contextlib.contextmanager
def cwd_importable() -> Iterator[None]:
    # A user's `mymodel.py` in the current directory must import even when the app was started as an
    # installed console script (whose sys.path does not hold the current directory).
    cwd = os.getcwd()
    added = cwd not in sys.path and "" not in sys.path
    if added:
        sys.path.insert(0, cwd)
    try:
        yield
    finally:
        if added:
            with contextlib.suppress(ValueError):
                sys.path.remove(cwd)


def check_source_prefix(module_name: str) -> None:
    """A prefix that is neither a source nor an importable module (`hff:llama`, `huggingface:gpt2`) is an unknown
    source, said with the closest one, rather than a failed import of a module of that name."""
    if "." in module_name or not module_name.isidentifier():
        return
    with cwd_importable():
        try:
            found = importlib.util.find_spec(module_name) is not None
        except (ImportError, ValueError):
            found = False
    if found:
        return
    close = difflib.get_close_matches(module_name.lower(), [p.rstrip(":") for p in PREFIXES.values()], n=1,
                                      cutoff=0.5)
    hint = f"did you mean {close[0]}:? " if close else ""
    raise ModelError(f"unknown model source {module_name + ':'!r} (and no module of that name): {hint}"
                     f"give {SPEC_FORMS}")


def load_factory(spec: str):
    module_name, factory_name = split_custom(spec)
    check_source_prefix(module_name)
    try:
        with cwd_importable():
            module = importlib.import_module(module_name)
    except SystemExit as exc:  # the user's module ending the program is its failure, not the app's end
        raise ModelError(f"importing {module_name!r} called sys.exit({exc.code!r})") from None
    except Exception as exc:  # noqa: BLE001 - any import-time failure is the user's, shown as one line
        raise ModelError(f"cannot import {module_name!r}: {first_line(exc)}") from None
    target: Any = module
    for part in factory_name.split("."):
        try:
            target = getattr(target, part)
        except AttributeError:
            raise ModelError(f"module {module_name!r} has no attribute {factory_name!r}") from None
    if not callable(target):
        raise ModelError(f"{spec!r} is not callable (it is {type(target).__name__})")
    return target
