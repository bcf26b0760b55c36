"""The torchvision, timm and transformers catalogues kept on disk: listing them imports the package and walks its
registry (2-3 s of CPU for torchvision, which imports torch's compiler with it, 3-7 s for the others on a small box),
and the measurement process answers one job at a time, so the app's first analysis would wait that long at every
start, and a process that never builds one of their models would import them for nothing. The listing is kept per
package version (read from the installed metadata, without importing the package) in the user cache directory
($TORCHPERF_CATALOGUE_CACHE to choose the file), and listed again when the version changes. A missing or corrupt file
is listed again, never an error: it is read as every small file the app reads back (core/input_files.py), so a FIFO
or /dev/zero there is neither waited on nor read into memory, and it is written only where a regular file may be
replaced (a link there is left as it is, and the listing is made again next time). Only a path the user chose with
$TORCHPERF_CATALOGUE_CACHE that is there and cannot be the cache (not a regular file, far larger than a listing) is
an error, one line.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Callable

from torchperf_tui.core.errors import TorchperfError
from torchperf_tui.core.input_files import InputFileError, NotJsonError, read_json
from torchperf_tui.core.kept_files import CATALOGUE_CACHE_ENV
from torchperf_tui.core.output_files import write_text
from torchperf_tui.engine.workloads.model_entry import ModelEntry

PACKAGES = {"torchvision": "torchvision", "timm": "timm", "hf": "transformers"}
FILENAME = "catalogue.json"
# The listings take about 0.3 MB: a file far larger is not this cache, and is not read into memory.
MAX_CACHE_BYTES = 16 << 20


def cache_path() -> Path:
    if os.environ.get(CATALOGUE_CACHE_ENV, "").strip():
        return Path(os.environ[CATALOGUE_CACHE_ENV].strip()).expanduser()
    import platformdirs

    return Path(platformdirs.user_cache_dir("torchperf-tui")) / FILENAME


def version_key(source: str) -> str | None:
    """'transformers 5.24.0': the installed version of the package a source lists (None: not installed)."""
    from importlib import metadata

    try:
        return f"{PACKAGES[source]} {metadata.version(PACKAGES[source])}"
    except metadata.PackageNotFoundError:
        return None


def cached(source: str, listing: Callable[[], list[ModelEntry]]) -> list[ModelEntry]:
    """`listing()`'s entries for `source`, from the cache when it holds them for the installed version."""
    key = version_key(source)
    path = cache_path()
    kept = _read(path)
    entries = _entries(kept.get(source), key) if key is not None else None
    if entries is not None:
        return entries
    entries = listing()
    if key is not None:
        kept[source] = {"key": key, "entries": [_entry_dict(e) for e in entries]}
        _write(path, kept)
    return entries


def _read(path: Path) -> dict:
    """What the cache holds, {} when it holds nothing usable. InputFileError only for a path chosen with
    $TORCHPERF_CATALOGUE_CACHE that is there and cannot be the cache."""
    named = bool(os.environ.get(CATALOGUE_CACHE_ENV, "").strip())
    try:
        data = read_json(path, f"the catalogue cache (${CATALOGUE_CACHE_ENV})" if named else "the catalogue cache",
                         MAX_CACHE_BYTES)
    except (OSError, NotJsonError):  # not there yet, or not a listing: listed again, and kept if it can be
        return {}
    except InputFileError:  # not a regular file, over its cap, or no folder there
        if named and os.path.exists(path):
            raise
        return {}
    return data if isinstance(data, dict) else {}


def _entries(block, key: str) -> list[ModelEntry] | None:
    """The kept entries when `block` is a well-formed listing of version `key`, else None (listed again)."""
    if not isinstance(block, dict) or block.get("key") != key or not isinstance(block.get("entries"), list):
        return None
    entries = []
    for item in block["entries"]:
        if not (isinstance(item, dict) and isinstance(item.get("name"), str) and isinstance(item.get("task"), str)
                and isinstance(item.get("input_shape"), list)
                and all(type(d) is int and d >= 1 for d in item["input_shape"])
                and isinstance(item.get("supported", True), bool) and isinstance(item.get("reason", ""), str)
                and isinstance(item.get("source", ""), str)
                and all(text.isprintable() for text in (item["name"], item["task"], item.get("reason", ""),
                                                        item.get("source", "")))):
            return None  # a control character (an escape sequence) is no model's: written by something else
        entries.append(ModelEntry(item["name"], item["task"], tuple(item["input_shape"]), item.get("supported", True),
                                  item.get("reason", ""), source=item.get("source", "torchvision")))
    return entries


def _entry_dict(entry: ModelEntry) -> dict:
    return {"name": entry.name, "task": entry.task, "input_shape": list(entry.input_shape),
            "supported": entry.supported, "reason": entry.reason, "source": entry.source}


def _write(path: Path, kept: dict) -> None:
    """Best effort, whole or not at all (a temporary file renamed over it): a cache that cannot be written is
    listed again next time."""
    try:
        write_text(path, json.dumps(kept), make_parents=True)
    except (TorchperfError, OSError):
        pass
