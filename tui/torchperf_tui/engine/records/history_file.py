"""The history file: an append-only JSON-lines file of run records, and its reader.

One record per line, appended with open-append-write-fsync as soon as a run completes, so a crash or a
dropped SSH session loses at most the line being written. The file is input like any other: only a regular
file is read (a FIFO or /dev/zero is refused, not waited on), a line is bounded in length and nesting, and
every field of a record is checked. A line that is not a record (a truncated last line from a kill, an edit
gone wrong, binary noise) is skipped and counted, one warning line for them all, never a crash.
`HistoryFile.load(last=n)` reads backwards from the end, so its cost follows n, not the file.

No torch and no textual here (see engine/records/history_records.py).
"""

from __future__ import annotations

import errno
import json
import os
import stat
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable

from torchperf_tui.core.errors import TorchperfError
from torchperf_tui.engine.records.history_records import HistoryRecord
from torchperf_tui.core.input_files import kind_refusal, open_regular
from torchperf_tui.core.kept_files import HISTORY, default_history_path, kept_file_at
from torchperf_tui.core.kept_files import HISTORY_ENV as HISTORY_ENV  # where it is chosen; named here too
from torchperf_tui.core.output_files import writable_folder
from torchperf_tui.core.formatting import format_bytes

# The longest line the reader parses. A record takes about 20 bytes a sample, so 16 MiB holds some 800,000
# samples (a tiny model timed for a minute); `HistoryFile.append` refuses a longer record, so that everything the
# writer writes, the reader reads. The bound is what keeps one line of /dev/urandom from filling the memory.
MAX_LINE_BYTES = 16 << 20
# Read backwards from the end (`HistoryFile.load(last=...)`) in blocks of this size; a module global so that
# tests can shrink it below a line's length.
READ_BLOCK_BYTES = 256 << 10
# Bad lines a warning names (with their line numbers) before it only counts the rest.
WARNING_EXAMPLES = 3

# How much of a history's start is read to tell it from another file before appending (_refuse_foreign), and what
# counts as blank there: white space, NUL bytes (a crash can leave a run of them), a UTF-8 byte-order mark.
HEAD_BYTES = 64 << 10
_BLANK = b" \t\r\n\x00"
_BOM = b"\xef\xbb\xbf"
_O_NONBLOCK = getattr(os, "O_NONBLOCK", 0)  # POSIX: opening a FIFO must not wait for a writer
_O_BINARY = getattr(os, "O_BINARY", 0)  # Windows: no newline translation
_O_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)  # POSIX: appending through a symbolic link is refused


class HistoryNotDurable(TorchperfError):
    """The records are in the history file (every reader sees them, they outlive this process) but the
    kernel did not confirm that they reached the disk: fsync of the file or of its folder failed, so a crash
    of the machine or a power loss may still lose them. Not "not saved": say what happened.

    `path`, `reason` (the OS's words) and `count` (records written) let a caller word it its own way.
    """

    def __init__(self, path: Path, reason: str, count: int = 1) -> None:
        self.path, self.reason, self.count = path, reason, count
        what = "run saved" if count == 1 else f"{count} runs saved"
        super().__init__(f"{what} to history {path}, but not flushed to disk (fsync failed: {reason})")


@dataclass
class LoadResult:
    """The records that parsed, in file order (oldest first), and what was skipped.

    `skipped` counts the lines that were not records; `warnings` says so in at most one line: the one bad
    line with its number, or the count with the first few. `offsets[i]` is the byte offset of the line
    `records[i]` came from. `start` is where the lines read begin: 0 when the read reached the start of the
    file, so there is nothing older; else `HistoryFile.load(last=n, before=start)` reads the page before this one.
    """

    records: list[HistoryRecord]
    warnings: list[str]
    path: Path | None = None
    skipped: int = 0
    offsets: list[int] = field(default_factory=list)
    start: int = 0

    @property
    def more_before(self) -> bool:
        """Whether the file holds lines older than these (a `load(last=...)` that stopped early)."""
        return self.start > 0

    def last(self, n: int | None) -> list[HistoryRecord]:
        """The newest `n` records, oldest first (all of them when n is None)."""
        if n is None:
            return list(self.records)
        return list(self.records[-n:]) if n > 0 else []


# One writer at a time within a process (the "newline before a torn line" check and the write go together);
# flock covers other processes where the platform has it.
_append_lock = threading.Lock()


class HistoryFile:
    """The append-only history file. Each `append` is durable when it returns (HistoryNotDurable says when the
    line was written but fsync failed); nothing needs closing."""

    def __init__(self, path: str | os.PathLike | None = None) -> None:
        self.path: Path = default_history_path(path)

    def append(self, record: HistoryRecord) -> None:
        """Write `record` as one line, then fsync: it survives a crash or kill the moment this returns."""
        self.extend([record])

    def extend(self, records: Iterable[HistoryRecord]) -> None:
        """Write the records (both arms of a comparison, say) in one write, then fsync once.

        TorchperfError when nothing was written (the folder cannot be made, the path is a FIFO or a
        device, the disk is full, a record is over MAX_LINE_BYTES); HistoryNotDurable when the lines were
        written, so every reader sees them, but fsync failed.
        """
        lines = [json.dumps(r.to_dict(), ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode("utf-8")
                 for r in records]
        if not lines:
            return
        for line in lines:
            if len(line) > MAX_LINE_BYTES:
                raise TorchperfError(f"a record of {format_bytes(len(line))} is over the history's "
                                     f"{format_bytes(MAX_LINE_BYTES)} a line: too many samples to keep")
        data = b"\n".join(lines) + b"\n"
        written = False
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            _refuse_kept(self.path)
            try:  # lstat: a symbolic link is refused, as every file the app writes refuses one
                _refuse_kind(self.path, os.lstat(self.path).st_mode)
                created = False
            except FileNotFoundError:
                created = True
            with _append_lock:
                # O_APPEND: the kernel puts each write at the current end, even with another process appending.
                # O_NONBLOCK: a FIFO put there must be refused, not waited on; O_RDWR: for the torn-line check.
                # O_NOFOLLOW: a symbolic link put there since the check is refused too (ELOOP, below).
                try:
                    fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT | _O_NONBLOCK | _O_BINARY
                                 | _O_NOFOLLOW, 0o644)
                except OSError as exc:
                    if exc.errno == errno.ELOOP:
                        _refuse_kind(self.path, stat.S_IFLNK)
                    raise
                try:
                    _refuse_kind(self.path, os.fstat(fd).st_mode)
                    _lock_file(fd)
                    _refuse_foreign(self.path, fd)
                    if _ends_without_newline(fd):
                        # A writer killed mid-line left a torn line: start on a fresh one so that only the
                        # torn record is lost, not this one glued to it.
                        data = b"\n" + data
                    _append_whole(fd, data)
                    written = True
                    os.fsync(fd)
                finally:
                    os.close(fd)
            if created:
                _fsync_directory(self.path.parent)
        except OSError as exc:
            reason = exc.strerror or str(exc)
            if written:
                raise HistoryNotDurable(self.path, reason, len(lines)) from None
            raise TorchperfError(f"cannot write the history file {self.path}: {reason}") from None

    def check_writable(self) -> None:
        """TorchperfError, in one line, unless a record could be appended now: asked before a run, so that a
        history that cannot take its record is said before anything is measured. Nothing is created or written
        (a full disk is found only by the write itself)."""
        path = self.path
        _refuse_kept(path)
        try:
            mode = os.lstat(path).st_mode
        except (FileNotFoundError, NotADirectoryError):  # not there yet: where it would be made
            folder = next(p for p in path.parents if os.path.lexists(p))  # the root always exists
            if not folder.is_dir():
                raise TorchperfError(f"cannot write the history file {path}: {folder} is not a folder") from None
            if not writable_folder(folder):
                raise TorchperfError(f"cannot write the history file {path}: the folder {folder} is not "
                                     "writable") from None
            return
        except OSError as exc:
            raise TorchperfError(f"cannot write the history file {path}: {exc.strerror or exc}") from None
        _refuse_kind(path, mode)
        try:  # opened as an append opens it, which writes nothing and meets what an append would (EACCES, EROFS);
            # its start read as an append reads it
            fd = os.open(path, os.O_RDWR | os.O_APPEND | _O_NONBLOCK | _O_BINARY | _O_NOFOLLOW)
            try:
                _refuse_foreign(path, fd)
            finally:
                os.close(fd)
        except OSError as exc:
            raise TorchperfError(f"cannot write the history file {path}: {exc.strerror or exc}") from None

    def load(self, last: int | None = None, *, before: int | None = None,
             max_line_bytes: int = MAX_LINE_BYTES) -> LoadResult:
        """The records that parse, oldest first; every other line is skipped and counted, and `warnings`
        says so in one line. A missing file is an empty history. Anything but a regular file (a FIFO, a
        device such as /dev/zero, a folder) is refused with a TorchperfError, without waiting on it.

        `last`: only the newest `last` records, read backwards from the end in blocks, so the cost follows
        what is asked for, not the size of the file. `before`: a byte offset, a LoadResult's `start`, to
        read the records before it (the next older page). Without `last` the file is streamed line by line.
        A line longer than `max_line_bytes` is skipped without ever being held in memory whole.
        """
        if last is not None and last < 0:
            raise ValueError(f"last must be >= 0 (or None), not {last}")
        fh = self._open()
        if fh is None:
            return LoadResult([], [], self.path)
        try:
            with fh:
                return self._read(fh, last, before, max_line_bytes)
        except OSError as exc:
            raise TorchperfError(f"cannot read the history file {self.path}: {exc.strerror or exc}") from None

    def stream(self, max_line_bytes: int = MAX_LINE_BYTES) -> "RecordStream":
        """The records oldest first, read a line at a time as iterated; a file not a regular one is refused here."""
        return RecordStream(self.path, self._open(), max_line_bytes)

    def _open(self):
        """The file opened for reading, None when there is none (an empty history); TorchperfError if unreadable."""
        try:
            return open_regular(self.path, "the history file")
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise TorchperfError(f"cannot read the history file {self.path}: {exc.strerror or exc}") from None

    def _read(self, fh, last: int | None, before: int | None, max_line_bytes: int) -> LoadResult:
        size = os.fstat(fh.fileno()).st_size
        end = size if before is None else max(0, min(before, size))
        backwards = last is not None
        if last == 0:
            return LoadResult([], [], self.path, start=end)
        lines = _lines_backward(fh, end, max_line_bytes) if backwards else _lines_forward(fh, end, max_line_bytes)
        records: list[HistoryRecord] = []
        offsets: list[int] = []
        skipped = 0
        examples: list[tuple[int, int, str]] = []  # (offset, line number or 0 when not known yet, problem)
        start = 0
        for offset, number, parsed in _parsed(lines, max_line_bytes):  # number: a line's only when reading forwards
            if isinstance(parsed, HistoryRecord):
                records.append(parsed)
                offsets.append(offset)
                if backwards and len(records) >= last:
                    start = offset
                    break
                continue
            skipped += 1
            if not backwards:
                if len(examples) < WARNING_EXAMPLES:
                    examples.append((offset, number, parsed))
            else:  # newest first: keep the last ones met, the first in the file
                examples = [*examples, (offset, 0, parsed)][-WARNING_EXAMPLES:]
        if backwards:
            records.reverse()
            offsets.reverse()
            examples.sort()
            numbers = _line_numbers(fh, [offset for offset, _, _ in examples])
            examples = [(offset, numbers[offset], problem) for offset, _, problem in examples]
        return LoadResult(records, _skipped_warning(self.path, skipped, examples), self.path,
                          skipped=skipped, offsets=offsets, start=start)


def _refuse_kind(path: Path, mode: int) -> None:
    """TorchperfError unless `mode` is a regular file's: a FIFO blocks a writer until the other end opens,
    /dev/zero never ends, a folder is no history, and a symbolic link is not replaced or followed."""
    refusal = kind_refusal(path, mode, "the history file")
    if refusal is not None:
        raise TorchperfError(refusal)


class RecordStream:
    """A history's records, iterated once; then `skipped` and `warnings` say what was not a record, as LoadResult's."""

    def __init__(self, path: Path, fh, max_line_bytes: int) -> None:
        self.path, self._fh, self._max = path, fh, max_line_bytes
        self.skipped, self.warnings = 0, []

    def __iter__(self):
        fh, self._fh = self._fh, None
        if fh is None:
            return
        examples: list[tuple[int, int, str]] = []
        try:
            with fh:
                end = os.fstat(fh.fileno()).st_size  # lines appended while it is read are left to the next read
                for offset, number, parsed in _parsed(_lines_forward(fh, end, self._max), self._max):
                    if isinstance(parsed, HistoryRecord):
                        yield parsed
                        continue
                    self.skipped += 1
                    examples = (examples + [(offset, number, parsed)])[:WARNING_EXAMPLES]
        except OSError as exc:
            raise TorchperfError(f"cannot read the history file {self.path}: {exc.strerror or exc}") from None
        self.warnings = _skipped_warning(self.path, self.skipped, examples)


def _refuse_kept(path: Path) -> None:
    """TorchperfError when the history would be another file the app keeps (the measured ceilings)."""
    kept = kept_file_at(path, own=HISTORY)
    if kept is not None:
        raise TorchperfError(f"the history file {path} is {kept}: runs are not appended to it")


def _lines_forward(fh, end: int, max_len: int):
    """(offset, bytes without the newline, torn) for each line starting before `end`, first to last; the
    bytes are None for a line over `max_len`, which is skipped in pieces. `torn`: the file's last line had
    no newline (a write cut short)."""
    offset = 0
    while offset < end:
        line = fh.readline(max_len + 1)
        if not line:
            return
        start = offset
        offset += len(line)
        if line.endswith(b"\n"):
            yield start, line[:-1], False
        elif len(line) <= max_len:
            yield start, line, True
        else:
            while True:  # over the bound: read on to its newline without keeping any of it
                piece = fh.readline(READ_BLOCK_BYTES)
                offset += len(piece)
                if not piece or piece.endswith(b"\n"):
                    break
            yield start, None, not piece


def _lines_backward(fh, end: int, max_len: int):
    """The lines of the first `end` bytes, last to first, as `_lines_forward` gives them; the file is read
    backwards in blocks, so reading the last few lines costs the same in a file of any size."""
    pos = end
    line_end = end  # where the line being put together ends (its newline, or `end`)
    parts: list[bytes] = []  # its pieces seen so far, right to left; dropped once it is over the bound
    torn = True  # until a newline is seen, the line being put together is the last one, without its newline
    while pos > 0:
        low = max(0, pos - READ_BLOCK_BYTES)
        fh.seek(low)
        chunk = fh.read(pos - low)
        if len(chunk) != pos - low:
            raise OSError(0, "the file shrank while it was being read")
        right = len(chunk)
        while (newline := chunk.rfind(b"\n", 0, right)) >= 0:
            start = low + newline + 1
            if line_end > start:
                data = b"".join([chunk[newline + 1:right], *reversed(parts)]) if line_end - start <= max_len else None
                yield start, data, torn
            torn = False
            parts = []
            line_end = low + newline
            right = newline
        if line_end - low <= max_len:
            parts.append(chunk[:right])
        else:
            parts = []
        pos = low
    if line_end > 0:
        yield 0, (b"".join(reversed(parts)) if line_end <= max_len else None), torn


def _line_numbers(fh, offsets: list[int]) -> dict[int, int]:
    """The 1-based line number of the line at each offset: its newlines before, counted in blocks. Only
    when a backwards read has lines to name in a warning."""
    numbers: dict[int, int] = {}
    pos = count = 0
    for target in sorted(offsets):
        while pos < target:
            fh.seek(pos)
            chunk = fh.read(min(4 * READ_BLOCK_BYTES, target - pos))
            if not chunk:
                break
            count += chunk.count(b"\n")
            pos += len(chunk)
        numbers[target] = count + 1
    return numbers


def _parsed(lines, max_len: int):
    """(offset, line number, the record or what is wrong with it) for each line but the blank ones (no warning)."""
    for number, (offset, data, torn) in enumerate(lines, start=1):
        if data is None or data.strip():
            yield offset, number, _parse_line(data, torn, max_len)


def _parse_line(data: bytes | None, torn: bool, max_len: int) -> "HistoryRecord | str":
    """The record on a line, or what is wrong with it in a few words."""
    if data is None:
        return f"longer than {format_bytes(max_len)}, the most a record may take"
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return "not UTF-8 text"
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        if torn:
            return f"truncated last line, a write interrupted by a kill or crash ({exc.msg})"
        return f"not valid JSON ({exc.msg})"
    except RecursionError:  # the C parser recurses once per [ or {: a line of 200,000 [ hits the limit
        return "not valid JSON (nested too deeply)"
    except ValueError as exc:  # an integer of more than 4,300 digits
        return f"not valid JSON ({str(exc).split(':')[0]})"
    try:
        return HistoryRecord.from_dict(value)
    except ValueError as exc:
        return str(exc)


def _skipped_warning(path: Path, skipped: int, examples: list[tuple[int, int, str]]) -> list[str]:
    """One warning line for all the bad lines of a read: a file of binary noise is one line, not thousands."""
    if skipped == 0:
        return []
    if skipped == 1:
        _, number, problem = examples[0]
        return [f"{path}:{number}: skipped: {problem}"]
    named = "; ".join(f"line {number}: {problem}" for _, number, problem in examples)
    more = f"; and {skipped - len(examples)} more" if skipped > len(examples) else ""
    return [f"{path}: skipped {skipped} bad lines ({named}{more})"]


def _lock_file(fd: int) -> None:
    try:
        import fcntl
    except ImportError:  # Windows: the in-process lock and O_APPEND are what there is
        return
    fcntl.flock(fd, fcntl.LOCK_EX)  # released when fd is closed


def _refuse_foreign(path: Path, fd: int) -> None:
    """TorchperfError when the file has something in it and no line of its head (HEAD_BYTES) starts as a record
    does ('{"', past blank space): it holds something else (a CSV, a log, /etc/passwd), which a history is never
    appended to (its readers would find every line of it bad). A history whose first lines are damaged (a torn record,
    NUL bytes a crash left, an editor's byte-order mark) still has a record's line within its head."""
    os.lseek(fd, 0, os.SEEK_SET)
    head = os.read(fd, HEAD_BYTES)
    if not head.strip(_BLANK):
        return
    if any(line.lstrip(_BLANK + _BOM).startswith(b'{"') for line in head.split(b"\n")):
        return
    raise TorchperfError(f"the history file {path} holds something else (no line of its start is a run's record): "
                         "runs are not appended to it")


def _ends_without_newline(fd: int) -> bool:
    size = os.fstat(fd).st_size
    if size == 0:
        return False
    os.lseek(fd, size - 1, os.SEEK_SET)
    return os.read(fd, 1) != b"\n"


def _append_whole(fd: int, data: bytes) -> None:
    """All of `data` at the end of the file, or none of it: a write cut short (a full disk) is cut back off the
    file, so that no reader meets half a record. Called under the file's lock, so the end is ours."""
    start = os.fstat(fd).st_size
    try:
        view = memoryview(data)
        while view:
            written = os.write(fd, view)
            if written <= 0:
                raise OSError(errno.EIO, "the write made no progress")
            view = view[written:]
    except BaseException:
        try:
            os.ftruncate(fd, start)
        except OSError:
            pass
        raise


def _fsync_directory(directory: Path) -> None:
    """A new file's directory entry must reach the disk too, or a crash can lose the whole file. An OSError
    means it did not (the caller's HistoryNotDurable); a platform or file system that cannot sync a folder
    is not a failure."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:  # Windows cannot open a folder; the data itself is already synced
        return
    try:
        os.fsync(fd)
    except OSError as exc:
        if exc.errno not in (errno.EINVAL, errno.ENOTSUP, errno.EBADF):
            raise
    finally:
        os.close(fd)
