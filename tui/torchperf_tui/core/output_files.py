"""Every file the app writes (traces, memory snapshots, exports, screenshots) is written here, safely.

A target must be a regular file or not exist yet: a device node, a directory, a symbolic link, a FIFO is
refused with one line, never replaced (as root, writing a trace to /dev/full once replaced the device). The
data goes to a new temporary file beside the target, created exclusively so it can clobber nothing, and is
renamed over the target only once it is complete; a failure removes the temporary file, and whatever the writer
left beside it under its name (Kineto writes a trace to `<path>.tmp` first, and leaves it on a full disk). A file the
app keeps (the history in use, the measured ceilings: core/kept_files.py) is never written over by another
output. No torch, no Textual: the CLI, the engine and the app all call it.
"""

from __future__ import annotations

import os
import re
import stat
import tempfile
import time
from pathlib import Path
from typing import Callable

from torchperf_tui.core.errors import TorchperfError
from torchperf_tui.core.input_files import file_kind
from torchperf_tui.core.kept_files import kept_file_at


class OutputPathError(TorchperfError):
    """A path the app was asked to write that it must not or cannot write."""


def check_output_path(path: str | os.PathLike, *, make_parents: bool = False, own: str | None = None) -> Path:
    """The target as a Path, if it may be written: a regular file or nothing yet, in a folder that exists
    (or may be made) and is writable, and not a file the app keeps (`own`: the kept file this write is, kept_files.HISTORY or
    CEILINGS, which it may replace). Raises OutputPathError with one line otherwise."""
    text = os.fspath(path)
    if not text.strip():
        raise OutputPathError("empty output path")
    target = Path(text).expanduser()
    try:
        info = os.lstat(target)
    except FileNotFoundError:
        info = None
    except OSError as exc:
        raise OutputPathError(f"cannot write {target}: {exc.strerror or exc}") from None
    if info is not None and not stat.S_ISREG(info.st_mode):
        raise OutputPathError(f"will not write {target}: it is {file_kind(info.st_mode)}, not a regular file")
    kept = kept_file_at(target, own=own)
    if kept is not None:
        raise OutputPathError(f"will not write {target}: it is {kept}, and would lose what it keeps")
    parent = target.parent
    if make_parents:
        try:
            parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise OutputPathError(f"cannot create the folder {parent}: {exc.strerror or exc}") from None
    if not parent.is_dir():
        raise OutputPathError(f"cannot write {target}: the folder {parent} does not exist")
    if not writable_folder(parent):
        raise OutputPathError(f"cannot write {target}: the folder {parent} is not writable")
    return target


def writable_folder(folder: Path) -> bool:
    """Whether this process may create a file in `folder`: its permissions, and a file system mounted read-only
    (access() says EROFS even to root)."""
    effective = os.access in os.supports_effective_ids
    return os.access(folder, os.W_OK | os.X_OK, effective_ids=effective)


def write_output(path: str | os.PathLike, write: Callable[[str], None], *, make_parents: bool = False,
                 own: str | None = None) -> Path:
    """Call `write(temp_path)` to fill a new temporary file beside `path`, then rename it over `path`.

    `write` may open the temporary path itself (a profiler's exporter does); a `write` that raises, or
    that leaves the file empty, fails the whole write with one line and leaves `path` as it was. `own`: see
    check_output_path.
    """
    target = check_output_path(path, make_parents=make_parents, own=own)
    try:
        fd, temp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    except OSError as exc:
        raise OutputPathError(f"cannot write {target}: {exc.strerror or exc}") from None
    os.close(fd)
    try:
        try:
            write(temp)
        except TorchperfError:
            raise
        except OSError as exc:
            raise OutputPathError(f"cannot write {target}: {exc.strerror or exc}") from None
        try:
            size = os.path.getsize(temp)
        except OSError:
            size = 0
        if size == 0:  # an exporter that logs its failure instead of raising (Kineto does) writes nothing
            raise OutputPathError(f"cannot write {target}: nothing was written{_when_full(target.parent)}")
        _match_mode(temp, target)
        check_output_path(target, own=own)  # something may have appeared there while we wrote
        try:
            os.replace(temp, target)
        except OSError as exc:
            raise OutputPathError(f"cannot write {target}: {exc.strerror or exc}") from None
    except BaseException:
        _remove_temporaries(temp)
        raise
    return target


def _remove_temporaries(temp: str) -> None:
    """The temporary file and whatever the writer made beside it under its name ('<temp>.tmp'): mkstemp's
    name is new and random, so nothing else starts with it."""
    folder, name = os.path.split(temp)
    try:
        names = [n for n in os.listdir(folder) if n.startswith(name)]
    except OSError:
        names = [name]
    for leftover in names:
        try:
            os.unlink(os.path.join(folder, leftover))
        except OSError:
            pass


def _when_full(folder: Path) -> str:
    """' (no space left on the device)' when the folder's file system has no free block, else ''."""
    try:
        info = os.statvfs(folder)
    except (OSError, AttributeError):  # AttributeError: Windows has no statvfs
        return ""
    return " (no space left on the device)" if info.f_bavail == 0 else ""


def write_bytes(path: str | os.PathLike, data: bytes, *, own: str | None = None, make_parents: bool = False) -> Path:
    def fill(temp: str) -> None:
        with open(temp, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())

    if not data:
        raise OutputPathError(f"nothing to write to {os.fspath(path)}")
    return write_output(path, fill, own=own, make_parents=make_parents)


def write_text(path: str | os.PathLike, text: str, *, own: str | None = None, make_parents: bool = False) -> Path:
    return write_bytes(path, text.encode("utf-8"), own=own, make_parents=make_parents)


def _match_mode(temp: str, target: Path) -> None:
    """mkstemp makes 0600; give the file the target's mode, or what a plain open() would (0666 less umask)."""
    try:
        mode = stat.S_IMODE(os.stat(target).st_mode)
    except FileNotFoundError:
        mode = 0o666 & ~_umask()
    try:
        os.chmod(temp, mode)
    except OSError:
        pass


def _umask() -> int:
    """The process umask, read without changing it (os.umask would set it for a moment, for every thread)."""
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    return 0o022


def artifact_path(kind: str, model: str, ext: str, out_dir: str | None = None) -> str:
    """<out_dir, else temp dir/torchperf-tui/<kind>>/<model>-<UTC time>-<pid>.<ext>: where a trace or a
    memory snapshot goes when the user names no path (the writer makes the folder)."""
    folder = out_dir or os.path.join(tempfile.gettempdir(), "torchperf-tui", kind)
    safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", model).strip("_") or "model"
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    return os.path.join(folder, f"{safe}-{stamp}-{os.getpid()}.{ext}")
