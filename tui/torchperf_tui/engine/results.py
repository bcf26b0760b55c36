"""Run records, the history file, comparisons of two runs, and JSON/CSV/Markdown export.

The history is a JSON-lines file: one record per line, appended with open-append-write-fsync as soon as a
run completes, so a crash or a dropped SSH session loses at most the line being written. The file is input
like any other: only a regular file is read (a FIFO or /dev/zero is refused, not waited on), a line is bounded
in length and nesting, and every field of a record is checked. A line that is not a record (a truncated last
line from a kill, an edit gone wrong, binary noise) is skipped and counted, one warning line for them all,
never a crash. `History.load(last=n)` reads backwards from the end, so its cost follows n, not the file.

This module imports neither torch nor textual: `torchperf-tui history` and `export` (and the TUI's history
pane) read and render records without paying 2-3 s for torch. Only `fingerprint()` imports torch, through
the device probe, and it caches that probe. Records hold flags as a plain dict for the same reason.
"""

from __future__ import annotations

import csv
import dataclasses
import errno
import io
import json
import math
import os
import platform
import socket
import stat
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Literal

from torchperf_tui.engine.errors import TorchperfError
from torchperf_tui.engine.json_checks import finite_float, is_int, json_type, nonfinite_to_none, shown
from torchperf_tui.engine.nvml import to_jsonable
from torchperf_tui.engine.stats import TimingStats, compute_stats
from torchperf_tui.formatting import format_bytes, format_ms

if TYPE_CHECKING:  # only for annotations: importing them would import torch
    from torchperf_tui.engine.device import DeviceReport
    from torchperf_tui.engine.abtest import ABResult
    from torchperf_tui.engine.timing import TimingResult

HISTORY_ENV = "TORCHPERF_HISTORY"
HISTORY_APP_NAME = "torchperf-tui"
HISTORY_FILENAME = "history.jsonl"
# Bumped when a field changes meaning; readers ignore keys they do not know, so adding fields needs no bump.
RECORD_SCHEMA = 1

RecordKind = Literal["timing", "throughput", "compare"]
ExportFormat = Literal["json", "csv", "md"]
EXPORT_FORMATS: tuple[str, ...] = ("json", "csv", "md")


# --------------------------------------------------------------------------------------------------
# Records


@dataclass
class RunRecord:
    """One completed run as it is kept in the history and exported.

    `flags` is `Flags.to_dict()` and `flags_text` its `describe(device)`, stored at record time so that
    reading the history needs no torch. `fingerprint` is the environment (see `fingerprint()`); the run's
    own set-up (model, shape, dtype, channels_last, device, flags) lives in the record's fields.
    `details` carries what a kind adds (compile mode for timing; later throughput and compare data).
    """

    id: str
    kind: str
    created_at: str  # ISO 8601, UTC, when the run finished
    model: str
    input_shape: tuple[int, ...]
    dtype: str
    channels_last: bool
    device: str
    flags: dict[str, Any]
    flags_text: str
    stats: TimingStats | None  # None when the run was cancelled before any timed sample
    samples_ms: list[float]
    fingerprint: dict[str, Any]
    cancelled: bool = False
    duration_s: float | None = None
    timer: str = ""
    details: dict[str, Any] = field(default_factory=dict)
    schema: int = RECORD_SCHEMA

    @property
    def batch(self) -> int:
        return self.input_shape[0]

    @property
    def shape_text(self) -> str:
        return "x".join(str(d) for d in self.input_shape)

    @property
    def short_id(self) -> str:
        return self.id[:8]

    def setup(self) -> dict[str, Any]:
        """What was measured, for spotting that two runs are not like for like."""
        return {"model": self.model, "input_shape": self.shape_text, "dtype": self.dtype,
                "channels_last": self.channels_last, "device": self.device,
                "compile": self.details.get("compile_mode"), "shapes": self.details.get("shapes", "fixed")}

    def summary(self) -> str:
        """One line for `history` and notifications."""
        when = self.created_at.replace("T", " ")[:16]
        head = f"{when}  {self.short_id}  {self.kind:<6} {self.model}  {self.shape_text} {self.dtype}"
        if self.channels_last:
            head += " channels_last"
        if self.details.get("shapes", "fixed") != "fixed":
            head += f" shapes {self.details['shapes']}"
        if self.kind == "ab" and self.details.get("arm"):
            head += f" arm {self.details['arm']}"
        head += f"  {self.device}"
        if self.stats is None:
            body = "no timed samples"
        else:
            fps = "" if self.stats.fps is None else f"  {self.stats.fps:,.1f}/s"
            body = (f"p50 {format_ms(self.stats.p50_ms)}  p99 {format_ms(self.stats.p99_ms)}{fps}"
                    f"  (n={self.stats.n})")
        tail = "  [cancelled]" if self.cancelled else ""
        return f"{head}  {body}  flags: {self.flags_text}{tail}"

    def to_dict(self) -> dict[str, Any]:
        """JSON-able; non-finite floats become None so every JSON reader (not only Python's) accepts it."""
        data = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        data["input_shape"] = list(self.input_shape)
        data["stats"] = None if self.stats is None else dataclasses.asdict(self.stats)
        return nonfinite_to_none(to_jsonable(data))

    @classmethod
    def from_dict(cls, data: Any) -> "RunRecord":
        """The inverse of to_dict, checked field by field; unknown keys (from a newer version) are ignored.

        A record that passes is safe to summarise, compare and export: strings where strings belong, finite
        numbers where numbers do, objects of bounded depth. Raises ValueError naming the first problem, which
        `History.load` counts as a skipped line.
        """
        if not isinstance(data, dict):
            raise ValueError(f"a JSON {json_type(data)}, not a record object")
        missing = [k for k in ("id", "kind", "created_at", "model", "input_shape", "dtype", "device")
                   if k not in data]
        if missing:
            raise ValueError(f"record lacks {', '.join(missing)}")
        text = {name: _string(data, name) for name in ("id", "kind", "created_at", "model", "dtype", "device")}
        shape = data["input_shape"]
        if not (isinstance(shape, list) and shape and all(is_int(d) and d >= 0 for d in shape)):
            raise ValueError(f"input_shape is not a list of whole numbers: {shown(shape)}")
        samples = data.get("samples_ms")
        if samples is None:
            samples = []
        if not isinstance(samples, list):
            raise ValueError(f"samples_ms is a JSON {json_type(samples)}, not a list of numbers")
        # Floats whose sum is finite are each finite: the usual case, checked at C speed; else one by one.
        if not (set(map(type, samples)) <= {float} and math.isfinite(sum(samples))):
            samples = [finite_float(s, "a sample in samples_ms") for s in samples]
        stats = data.get("stats")
        duration = data.get("duration_s")
        schema = data.get("schema", RECORD_SCHEMA)
        if not is_int(schema):
            raise ValueError(f"schema is not a whole number: {shown(schema)}")
        return cls(
            **text, input_shape=tuple(shape),
            channels_last=_boolean(data, "channels_last"), flags=_object(data, "flags"),
            flags_text=_string(data, "flags_text", ""),
            stats=None if stats is None else TimingStats.from_dict(stats),
            samples_ms=samples, fingerprint=_object(data, "fingerprint"),
            cancelled=_boolean(data, "cancelled"),
            duration_s=None if duration is None else finite_float(duration, "duration_s"),
            timer=_string(data, "timer", ""), details=_object(data, "details"), schema=schema,
        )


# How deep flags, fingerprint and details may nest: the writer's own nest a few levels (an A/B verdict's tests);
# the bound keeps the recursive walks of export (to_jsonable, nonfinite_to_none, json.dumps) far from the
# recursion limit.
MAX_RECORD_DEPTH = 32


def _string(data: dict[str, Any], name: str, default: str | None = None) -> str:
    value = data.get(name, default)
    if not isinstance(value, str):
        raise ValueError(f"{name} is not a string: {shown(value)}")
    return value


def _boolean(data: dict[str, Any], name: str) -> bool:
    value = data.get(name, False)
    if not isinstance(value, bool):
        raise ValueError(f"{name} is not true or false: {shown(value)}")
    return value


def _object(data: dict[str, Any], name: str) -> dict[str, Any]:
    """A JSON object (null or absent: empty) whose values nest at most MAX_RECORD_DEPTH deep."""
    value = data.get(name)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ValueError(f"{name} is a JSON {json_type(value)}, not an object")
    stack = [(value, 1)]
    while stack:  # a loop, not recursion: the depth is what is being checked
        item, depth = stack.pop()
        if depth > MAX_RECORD_DEPTH:
            raise ValueError(f"{name} nests deeper than {MAX_RECORD_DEPTH} levels")
        children = item.values() if isinstance(item, dict) else item
        stack.extend((child, depth + 1) for child in children if isinstance(child, (dict, list)))
    return value


def new_record_id() -> str:
    """48 random bits in hex: short enough to type, plenty for one user's history."""
    return uuid.uuid4().hex[:12]


def _iso_utc(timestamp: float) -> str:
    return datetime.fromtimestamp(timestamp, timezone.utc).isoformat(timespec="seconds")


def record_from_timing(result: "TimingResult", fingerprint: dict[str, Any] | None = None) -> RunRecord:
    """A history record of a timing run. Without a fingerprint, one is taken now for the run's device."""
    env = environment_fingerprint(device=result.device) if fingerprint is None else dict(fingerprint)
    details: dict[str, Any] = {"warmup_iters": len(result.warmup_ms)}
    # getattr: fields that timing.py grew later; an older TimingResult simply lacks them.
    for name in ("compile_mode", "compiled", "compile_s", "compile_error"):
        if hasattr(result, name):
            details[name] = getattr(result, name)
    report = getattr(result, "shape_report", None)
    if getattr(result, "shapes", "fixed") != "fixed" and report is not None:
        details["shapes"] = result.shapes
        details["tuning_cost_ms"] = report.tuning_cost_ms
        details["first_seen"] = report.first_seen
        details["distinct_shapes"] = report.distinct
        details["repeat_p50_ms"] = result.repeat_stats.p50_ms if result.repeat_stats else None
    return RunRecord(
        id=new_record_id(), kind="timing", created_at=_iso_utc(result.started_at + result.duration_s),
        model=result.model, input_shape=tuple(result.input_shape), dtype=result.dtype,
        channels_last=result.channels_last, device=result.device, flags=result.flags.to_dict(),
        flags_text=result.flags.describe(result.device), stats=result.stats, samples_ms=list(result.samples_ms),
        fingerprint=env, cancelled=result.cancelled, duration_s=result.duration_s, timer=result.timer,
        details=details,
    )


def records_from_ab(result: "ABResult", fingerprint: dict[str, Any] | None = None) -> list[RunRecord]:
    """Two history records of an interleaved comparison, one per arm (kind "ab"), each carrying the
    verdict and the other arm's id, so a comparison is kept and exported like any run."""
    env = environment_fingerprint(device=result.device) if fingerprint is None else dict(fingerprint)
    ids = {"A": new_record_id(), "B": new_record_id()}
    verdict = result.verdict.to_dict() if result.verdict is not None else None
    created = _iso_utc(time.time())
    records = []
    for name, arm in (("A", result.a), ("B", result.b)):
        details = {"arm": name, "pair": ids["B" if name == "A" else "A"], "spec": arm.spec, "shapes": arm.shapes,
                   "blocks": len(arm.blocks), "verdict": verdict, "summary": result.summary()}
        records.append(RunRecord(
            id=ids[name], kind="ab", created_at=created, model=result.model,
            input_shape=tuple(result.input_shape), dtype=arm.dtype, channels_last=arm.channels_last,
            device=result.device, flags=arm.flags.to_dict(), flags_text=arm.flags.describe(result.device),
            stats=compute_stats(arm.samples_ms, batch=result.input_shape[0]),
            samples_ms=list(arm.samples_ms), fingerprint=env, cancelled=result.cancelled,
            duration_s=result.duration_s, timer="cuda-events" if result.device.startswith("cuda") else "perf_counter",
            details=details))
    return records


def records_of(result: "TimingResult | ABResult", fingerprint: dict[str, Any] | None = None) -> list[RunRecord]:
    """The history records of a finished measurement: one for a timing run, one per arm for an A/B.
    `fingerprint`: the environment as the process that measured saw it (None: take it here, with torch)."""
    if hasattr(result, "verdict"):  # an ABResult (imported by name only: it would import torch)
        return records_from_ab(result, fingerprint)
    return [record_from_timing(result, fingerprint)]


# --------------------------------------------------------------------------------------------------
# Environment fingerprint

_probe_lock = threading.Lock()
_cached_report: "DeviceReport | None" = None


def _device_report() -> "DeviceReport":
    """The device probe, taken once per process: NVML init and CUDA queries are not free."""
    global _cached_report
    with _probe_lock:
        if _cached_report is None:
            from torchperf_tui.engine.device import probe_device

            _cached_report = probe_device()
        return _cached_report


def clear_fingerprint_cache() -> None:
    """Forget the cached probe (a test, or a driver that changed under a long-running app)."""
    global _cached_report
    with _probe_lock:
        _cached_report = None


def _package_version(name: str) -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(name)
    except PackageNotFoundError:
        return None


def environment_fingerprint(report: "DeviceReport | None" = None, device: str | None = None) -> dict[str, Any]:
    """The environment a run's numbers depend on, as a flat JSON-able dict of strings and numbers.

    `device` ("cpu", "cuda", "cuda:N") picks which device's name goes in `device_name`; without it, the
    first GPU if CUDA is available, else the CPU. Unavailable values read "n/a (reason)". The probe is
    cached, so this is cheap after the first call; pass `report` to use one you already have.
    """
    from torchperf_tui import __version__

    report = report if report is not None else _device_report()
    data = to_jsonable(report)
    cpu_model = data["cpu"]["model"]
    gpus = data["gpus"]
    wants_gpu = device.startswith("cuda") if device else bool(report.cuda_available and gpus)
    if wants_gpu and gpus:
        index = 0
        if device and ":" in device and device.split(":", 1)[1].isdigit():
            index = int(device.split(":", 1)[1])
        gpu = gpus[index] if index < len(gpus) else None
        device_name = gpu["name"] if gpu else f"n/a (no GPU {index} in the probe)"
        capability = gpu["compute_capability"] if gpu else None
    else:
        device_name, capability = cpu_model, None
    env = {
        "device_name": device_name,
        "compute_capability": capability,
        "gpu_count": len(gpus),
        "driver": data["driver_version"],
        "torch": data["torch_version"],
        "torchvision": _package_version("torchvision"),
        "cuda_runtime": data["cuda_runtime"],
        "cudnn": data["cudnn_version"],
        "cpu": cpu_model,
        "cpu_threads": _torch_threads(data["cpu"]["torch_threads"]),
        "hostname": socket.gethostname(),
        "python": platform.python_version(),
        "platform": platform.platform(terse=True),
        "torchperf_tui": __version__,
    }
    return env


def _torch_threads(probed: Any) -> Any:
    """The intra-op thread count now: the cached probe's figure goes stale if anything changed it since."""
    torch = sys.modules.get("torch")
    return torch.get_num_threads() if torch is not None else probed


# The name for it; `record_from_timing` takes a parameter called `fingerprint`, hence the long name.
fingerprint = environment_fingerprint


# --------------------------------------------------------------------------------------------------
# The history file


def default_history_path(path: str | os.PathLike | None = None) -> Path:
    """Where the history lives: `path` if given, else $TORCHPERF_HISTORY, else the user's data directory."""
    if path is not None and str(path) != "":
        return Path(path).expanduser()
    env = os.environ.get(HISTORY_ENV, "").strip()
    if env:
        return Path(env).expanduser()
    import platformdirs  # installed with Textual; imported late, only the history needs it

    return Path(platformdirs.user_data_dir(HISTORY_APP_NAME)) / HISTORY_FILENAME


# The longest line the reader parses. A record takes about 20 bytes a sample, so 16 MiB holds some 800,000
# samples (a tiny model timed for a minute); `History.append` refuses a longer record, so that everything the
# writer writes, the reader reads. The bound is what keeps one line of /dev/urandom from filling the memory.
MAX_LINE_BYTES = 16 << 20
# Read backwards from the end (`History.load(last=...)`) in blocks of this size; a module global so that
# tests can shrink it below a line's length.
READ_BLOCK_BYTES = 256 << 10
# Bad lines a warning names (with their line numbers) before it only counts the rest.
WARNING_EXAMPLES = 3

_O_NONBLOCK = getattr(os, "O_NONBLOCK", 0)  # POSIX: opening a FIFO must not wait for a writer
_O_BINARY = getattr(os, "O_BINARY", 0)  # Windows: no newline translation


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
    file, so there is nothing older; else `History.load(last=n, before=start)` reads the page before this one.
    """

    records: list[RunRecord]
    warnings: list[str]
    path: Path | None = None
    skipped: int = 0
    offsets: list[int] = field(default_factory=list)
    start: int = 0

    @property
    def more_before(self) -> bool:
        """Whether the file holds lines older than these (a `load(last=...)` that stopped early)."""
        return self.start > 0

    def last(self, n: int | None) -> list[RunRecord]:
        """The newest `n` records, oldest first (all of them when n is None)."""
        if n is None:
            return list(self.records)
        return list(self.records[-n:]) if n > 0 else []

    def find(self, ref: str) -> RunRecord:
        """A record by id or unique id prefix; TorchperfError when none or several match."""
        matches = [r for r in self.records if r.id.startswith(ref)]
        exact = [r for r in matches if r.id == ref]
        if exact:
            return exact[-1]
        if len(matches) == 1:
            return matches[0]
        if not matches:
            raise TorchperfError(f"no run with id {ref!r} in the history")
        raise TorchperfError(f"id {ref!r} matches {len(matches)} runs: give more characters")


# One writer at a time within a process (the "newline before a torn line" check and the write go together);
# flock covers other processes where the platform has it.
_append_lock = threading.Lock()


class History:
    """The append-only history file. Each `append` is durable when it returns (HistoryNotDurable says when the
    line was written but fsync failed); nothing needs closing."""

    def __init__(self, path: str | os.PathLike | None = None) -> None:
        self.path: Path = default_history_path(path)

    def append(self, record: RunRecord) -> None:
        """Write `record` as one line, then fsync: it survives a crash or kill the moment this returns."""
        self.extend([record])

    def extend(self, records: Iterable[RunRecord]) -> None:
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
            try:
                _refuse_special(self.path, os.stat(self.path).st_mode)
                created = False
            except FileNotFoundError:
                created = True
            with _append_lock:
                # O_APPEND: the kernel puts each write at the current end, even with another process appending.
                # O_NONBLOCK: a FIFO put there must be refused, not waited on; O_RDWR: for the torn-line check.
                fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT | _O_NONBLOCK | _O_BINARY, 0o644)
                try:
                    _refuse_special(self.path, os.fstat(fd).st_mode)
                    _lock_file(fd)
                    if _ends_without_newline(fd):
                        # A writer killed mid-line left a torn line: start on a fresh one so that only the
                        # torn record is lost, not this one glued to it.
                        data = b"\n" + data
                    _write_all(fd, data)
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
        try:
            fh = _open_regular(self.path)
        except FileNotFoundError:
            return LoadResult([], [], self.path)
        except OSError as exc:
            raise TorchperfError(f"cannot read the history file {self.path}: {exc.strerror or exc}") from None
        try:
            with fh:
                return self._read(fh, last, before, max_line_bytes)
        except OSError as exc:
            raise TorchperfError(f"cannot read the history file {self.path}: {exc.strerror or exc}") from None

    def _read(self, fh, last: int | None, before: int | None, max_line_bytes: int) -> LoadResult:
        size = os.fstat(fh.fileno()).st_size
        end = size if before is None else max(0, min(before, size))
        backwards = last is not None
        if last == 0:
            return LoadResult([], [], self.path, start=end)
        lines = _lines_backward(fh, end, max_line_bytes) if backwards else _lines_forward(fh, end, max_line_bytes)
        records: list[RunRecord] = []
        offsets: list[int] = []
        skipped = 0
        examples: list[tuple[int, int, str]] = []  # (offset, line number or 0 when not known yet, problem)
        start = 0
        number = 0
        for offset, data, torn in lines:
            number += 1  # counts lines only when reading forwards
            if data is not None and not data.strip():
                continue  # a blank line is not a record and not worth a warning
            parsed = _parse_line(data, torn, max_line_bytes)
            if isinstance(parsed, RunRecord):
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


def _refuse_special(path: Path, mode: int) -> None:
    """TorchperfError unless `mode` is a regular file's: a FIFO blocks a reader (or writer) until the other
    end opens, /dev/zero never ends, a folder is no history."""
    if stat.S_ISREG(mode):
        return
    kinds = ((stat.S_ISFIFO, "a named pipe (FIFO)"), (stat.S_ISCHR, "a character device"),
             (stat.S_ISBLK, "a block device"), (stat.S_ISDIR, "a directory"), (stat.S_ISSOCK, "a socket"))
    kind = next((name for test, name in kinds if test(mode)), "not a file")
    raise TorchperfError(f"the history file {path} is {kind}, not a regular file")


def _open_regular(path: Path):
    """`path` opened for reading in binary, if it is a regular file. Checked by name first (opening some
    devices does something), then on the opened descriptor, opened with O_NONBLOCK, so that a FIFO swapped in
    between is refused rather than waited on."""
    _refuse_special(path, os.stat(path).st_mode)
    fd = os.open(path, os.O_RDONLY | _O_NONBLOCK | _O_BINARY)
    try:
        _refuse_special(path, os.fstat(fd).st_mode)
        return os.fdopen(fd, "rb", buffering=1 << 20)
    except BaseException:
        os.close(fd)
        raise


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


def _parse_line(data: bytes | None, torn: bool, max_len: int) -> "RunRecord | str":
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
        return RunRecord.from_dict(value)
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


def _ends_without_newline(fd: int) -> bool:
    size = os.fstat(fd).st_size
    if size == 0:
        return False
    os.lseek(fd, size - 1, os.SEEK_SET)
    return os.read(fd, 1) != b"\n"


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


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


# --------------------------------------------------------------------------------------------------
# Comparing two runs


@dataclass
class Comparison:
    """Run `candidate` against run `baseline`.

    median_ratio = candidate p50 / baseline p50 (below 1: the candidate is faster);
    speedup_pct = (baseline p50 / candidate p50 - 1) x 100, so +25 % means 1.25x as fast;
    latency_change_pct = (candidate p50 / baseline p50 - 1) x 100, so -20 % means 20 % less time.
    The diffs map a name to (baseline value, candidate value) for what differs between the two runs.
    """

    baseline_id: str
    candidate_id: str
    baseline_p50_ms: float
    candidate_p50_ms: float
    median_ratio: float
    speedup_pct: float
    latency_change_pct: float
    baseline_p99_ms: float
    candidate_p99_ms: float
    p99_ratio: float
    mean_ratio: float
    flags_diff: dict[str, tuple[Any, Any]]
    setup_diff: dict[str, tuple[Any, Any]]
    environment_diff: dict[str, tuple[Any, Any]]

    @property
    def like_for_like(self) -> bool:
        """Same model, input, dtype, layout, device and compile mode: only flags or environment differ."""
        return not self.setup_diff

    def summary(self) -> str:
        verdict = (f"{1 / self.median_ratio:.2f}x as fast" if self.median_ratio <= 1
                   else f"{self.median_ratio:.2f}x as slow")
        text = (f"{self.candidate_id[:8]} vs {self.baseline_id[:8]}: {verdict} "
                f"(p50 {format_ms(self.baseline_p50_ms)} -> {format_ms(self.candidate_p50_ms)}, "
                f"speed-up {self.speedup_pct:+.1f} %; p99 ratio {self.p99_ratio:.2f})")
        changed = [f"{name} {_on_off(a)}->{_on_off(b)}" for name, (a, b) in self.flags_diff.items()]
        text += "; flags: " + (", ".join(changed) if changed else "same")
        if self.setup_diff:
            text += "; not like for like: " + ", ".join(self.setup_diff)
        return text

    def to_dict(self) -> dict[str, Any]:
        return nonfinite_to_none(to_jsonable(self))

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Comparison":
        values = dict(data)
        for name in ("flags_diff", "setup_diff", "environment_diff"):
            values[name] = {k: tuple(v) for k, v in (data.get(name) or {}).items()}
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in values.items() if k in names})


def _on_off(value: Any) -> str:
    if isinstance(value, bool):
        return "on" if value else "off"
    return "default" if value is None else str(value)


def _dict_diff(a: dict[str, Any], b: dict[str, Any]) -> dict[str, tuple[Any, Any]]:
    keys = list(a) + [k for k in b if k not in a]
    return {k: (a.get(k), b.get(k)) for k in keys if a.get(k) != b.get(k)}


def compare_records(baseline: RunRecord, candidate: RunRecord) -> Comparison:
    """How `candidate` compares with `baseline` on median and p99 latency, and what differs between them."""
    for record in (baseline, candidate):
        if record.stats is None or record.stats.p50_ms <= 0:
            raise TorchperfError(f"run {record.short_id} has no timed samples to compare")
    a, b = baseline.stats, candidate.stats
    assert a is not None and b is not None
    return Comparison(
        baseline_id=baseline.id, candidate_id=candidate.id,
        baseline_p50_ms=a.p50_ms, candidate_p50_ms=b.p50_ms,
        median_ratio=b.p50_ms / a.p50_ms,
        speedup_pct=(a.p50_ms / b.p50_ms - 1.0) * 100.0,
        latency_change_pct=(b.p50_ms / a.p50_ms - 1.0) * 100.0,
        baseline_p99_ms=a.p99_ms, candidate_p99_ms=b.p99_ms,
        p99_ratio=b.p99_ms / a.p99_ms if a.p99_ms > 0 else math.inf,
        mean_ratio=b.mean_ms / a.mean_ms if a.mean_ms > 0 else math.inf,
        flags_diff=_dict_diff(baseline.flags, candidate.flags),
        setup_diff=_dict_diff(baseline.setup(), candidate.setup()),
        environment_diff=_dict_diff(baseline.fingerprint, candidate.fingerprint),
    )


# --------------------------------------------------------------------------------------------------
# Export

STATS_COLUMNS: tuple[str, ...] = tuple(f.name for f in dataclasses.fields(TimingStats))
CSV_BASE_COLUMNS: tuple[str, ...] = ("id", "kind", "created_at", "model", "input_shape", "batch", "dtype",
                                     "channels_last", "device", "cancelled", "duration_s", "timer",
                                     "compile_mode", "flags_text")


def _union_keys(dicts: Iterable[dict[str, Any]]) -> list[str]:
    keys: dict[str, None] = {}
    for d in dicts:
        keys.update(dict.fromkeys(d))
    return list(keys)


def _csv_value(value: Any) -> Any:
    if value is None:
        return ""
    if isinstance(value, float) and not math.isfinite(value):
        return ""
    return value


def _export_csv(records: list[RunRecord]) -> str:
    flag_keys = _union_keys(r.flags for r in records)
    env_keys = _union_keys(r.fingerprint for r in records)
    columns = [*CSV_BASE_COLUMNS, *STATS_COLUMNS, *(f"flag.{k}" for k in flag_keys),
               *(f"env.{k}" for k in env_keys)]
    out = io.StringIO()
    # "\n" rather than csv's default "\r\n": the text goes to stdout or a text-mode file.
    writer = csv.DictWriter(out, fieldnames=columns, lineterminator="\n")
    writer.writeheader()
    for r in records:
        row: dict[str, Any] = {
            "id": r.id, "kind": r.kind, "created_at": r.created_at, "model": r.model,
            "input_shape": r.shape_text, "batch": r.batch, "dtype": r.dtype, "channels_last": r.channels_last,
            "device": r.device, "cancelled": r.cancelled, "duration_s": r.duration_s, "timer": r.timer,
            "compile_mode": r.details.get("compile_mode"), "flags_text": r.flags_text,
        }
        stats = dataclasses.asdict(r.stats) if r.stats is not None else {}
        row.update({k: stats.get(k) for k in STATS_COLUMNS})
        row.update({f"flag.{k}": r.flags.get(k) for k in flag_keys})
        row.update({f"env.{k}": r.fingerprint.get(k) for k in env_keys})
        writer.writerow({k: _csv_value(v) for k, v in row.items()})
    return out.getvalue()


MD_COLUMNS: tuple[str, ...] = ("When (UTC)", "ID", "Model", "Input", "dtype", "Device", "Flags", "p50", "p90",
                               "p99", "Mean ± std", "Items/s", "First iter", "Device name")


def _md_cell(value: Any) -> str:
    return str(value).replace("|", "\\|").replace("\n", " ")


def _export_md(records: list[RunRecord]) -> str:
    lines = ["| " + " | ".join(MD_COLUMNS) + " |", "|" + "|".join("---" for _ in MD_COLUMNS) + "|"]
    for r in records:
        s = r.stats
        layout = " channels_last" if r.channels_last else ""
        if s is None:
            numbers = ["-"] * 6
        else:
            numbers = [format_ms(s.p50_ms), format_ms(s.p90_ms), format_ms(s.p99_ms),
                       f"{format_ms(s.mean_ms)} ± {format_ms(s.std_ms)}",
                       "-" if s.fps is None else f"{s.fps:,.1f}", format_ms(s.first_iter_ms)]
        cells = [r.created_at.replace("T", " ")[:19], r.short_id, r.model, r.shape_text, r.dtype + layout,
                 r.device, r.flags_text + (" (cancelled)" if r.cancelled else ""), *numbers,
                 r.fingerprint.get("device_name", "")]
        lines.append("| " + " | ".join(_md_cell(c) for c in cells) + " |")
    return "\n".join(lines) + "\n"


def export_records(records: Iterable[RunRecord], fmt: str = "json") -> str:
    """The records as text: "json" (an array of full records, samples included), "csv" (one row per run,
    flags as flag.*, environment as env.*, no samples) or "md" (a readable Markdown table)."""
    records = list(records)
    fmt = fmt.strip().lower()
    if fmt == "json":
        return json.dumps([r.to_dict() for r in records], indent=2, ensure_ascii=False, allow_nan=False) + "\n"
    if fmt == "csv":
        return _export_csv(records)
    if fmt in ("md", "markdown"):
        return _export_md(records)
    raise TorchperfError(f"unknown export format {fmt!r}: choose one of {', '.join(EXPORT_FORMATS)}")
