"""Every file the app reads back (the history, a baseline, the measured ceilings, the catalogue cache) is opened
here, safely, as core/output_files.py writes them.

Only a regular file is read: a FIFO would block the reader until something writes to it, /dev/zero never ends, a
folder is no file. The path is checked by name first (opening some devices does something), then opened with
O_NONBLOCK, so that a FIFO swapped in meanwhile opens at once instead of waiting for a writer, and checked again on
the descriptor. A small file (a state file, a bench --json result) is read whole, never past its cap: a huge file
is refused by its size, and one that grows while read is cut at the cap and refused too. Every refusal is one line
that names the file. Standard library only: the CLI reads these before it starts a measurement process.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any, BinaryIO

from torchperf_tui.core.errors import TorchperfError
from torchperf_tui.core.formatting import format_bytes

_O_NONBLOCK = getattr(os, "O_NONBLOCK", 0)  # POSIX: opening a FIFO must not wait for a writer
_O_BINARY = getattr(os, "O_BINARY", 0)  # Windows: no newline translation

_KINDS = ((stat.S_ISLNK, "a symbolic link"), (stat.S_ISFIFO, "a named pipe (FIFO)"),
          (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"), (stat.S_ISDIR, "a directory"),
          (stat.S_ISSOCK, "a socket"))


class InputFileError(TorchperfError):
    """A file the app was asked to read that it must not or cannot read (not a regular file, over its cap, an
    error of the OS); `path` is the file."""

    def __init__(self, path: str | os.PathLike, message: str) -> None:
        super().__init__(message)
        self.path = Path(path)


class NotJsonError(InputFileError):
    """A file that was read, and holds no JSON document (read_json): what it holds is wrong, not the path."""


def file_kind(mode: int) -> str:
    """What an `os.stat` mode is, in words: 'a directory', 'a named pipe (FIFO)', ... ('a regular file')."""
    if stat.S_ISREG(mode):
        return "a regular file"
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


def kind_refusal(path: str | os.PathLike, mode: int, what: str) -> str | None:
    """Why `what` at `path` is neither read nor written: '{what} {path} is a directory, not a regular file';
    None for a regular file."""
    if stat.S_ISREG(mode):
        return None
    return f"{what} {os.fspath(path)} is {file_kind(mode)}, not a regular file"


def open_regular(path: str | os.PathLike, what: str) -> BinaryIO:
    """`path` opened for reading in binary, if it is a regular file (a symbolic link to one is followed).

    FileNotFoundError passes through (a missing file is often an empty one to the caller), also for a path
    below a regular file (ENOTDIR: nothing can be there); anything else that keeps it from being read is an
    InputFileError naming `what` ('the history file', 'the baseline')."""
    path = Path(path)
    try:
        _refuse_kind(path, os.stat(path).st_mode, what)
        fd = os.open(path, os.O_RDONLY | _O_NONBLOCK | _O_BINARY)
    except FileNotFoundError:
        raise
    except NotADirectoryError as exc:
        raise FileNotFoundError(exc.errno, exc.strerror, os.fspath(path)) from None
    except OSError as exc:
        raise InputFileError(path, f"cannot read {what} {path}: {exc.strerror or exc}") from None
    try:
        _refuse_kind(path, os.fstat(fd).st_mode, what)
        return os.fdopen(fd, "rb", buffering=1 << 20)
    except BaseException:
        os.close(fd)
        raise


def read_small(path: str | os.PathLike, what: str, limit: int) -> bytes:
    """The whole of a regular file of at most `limit` bytes (see open_regular; FileNotFoundError passes
    through). A larger file is refused without reading it, one that grows past the cap while read is refused
    when the cap is reached: memory never holds more than `limit` + 1 bytes of it."""
    path = Path(path)
    try:
        with open_regular(path, what) as fh:
            size = os.fstat(fh.fileno()).st_size
            data = fh.read(limit + 1) if size <= limit else b""
    except OSError as exc:
        if isinstance(exc, FileNotFoundError):
            raise
        raise InputFileError(path, f"cannot read {what} {path}: {exc.strerror or exc}") from None
    if size > limit or len(data) > limit:
        shown = f"{format_bytes(size)}" if size > limit else "more than that"
        raise InputFileError(path, f"{what} {path} is {shown}, over the {format_bytes(limit)} it may take: not read")
    return data


def read_json(path: str | os.PathLike, what: str, limit: int) -> Any:
    """The JSON document in a regular file of at most `limit` bytes (read_small), parsed; None for an empty
    file (nothing kept in it yet); NotJsonError (an InputFileError) with one line when it is not UTF-8 JSON. JSON's NaN and
    Infinity parse: check the numbers taken from it."""
    data = read_small(path, what, limit)
    if not data.strip():
        return None
    try:
        return json.loads(data.decode("utf-8"))
    except UnicodeDecodeError:
        problem = "not UTF-8 text"
    except json.JSONDecodeError as exc:
        problem = f"not JSON ({exc.msg}, line {exc.lineno})"
    except RecursionError:  # the C parser recurses once per [ or {
        problem = "not JSON (nested too deeply)"
    except ValueError as exc:  # an integer of more than 4,300 digits
        problem = f"not JSON ({str(exc).split(':')[0]})"
    raise NotJsonError(path, f"{what} {os.fspath(path)} is {problem}")


def _refuse_kind(path: Path, mode: int, what: str) -> None:
    refusal = kind_refusal(path, mode, what)
    if refusal is not None:
        raise InputFileError(path, refusal)
