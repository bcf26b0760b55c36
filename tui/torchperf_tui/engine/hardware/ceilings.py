"""Measured ceilings: what a result holds (the most this device reached on compute per dtype and on a large
copy, with every workload tried beside it; on a GPU the host-device transfers too), and where it is kept. How they
are measured (the workloads, the dtypes, the thread counts) is engine/measurements/ceiling_measurement.py's.

Results are kept per device fingerprint (device name, torch, threads on the CPU) in the user data directory,
and measured again on request. On the CPU they stand in for the datasheet peaks that the OS cannot report.
A ceiling kept by an earlier version (one 2048^3 matmul, FORMAT 1) is still read, marked `outdated`, and
measured again by `ceilings()` unless asked only for what is kept. A GPU's entry kept before the transfers were measured
(FORMAT 2) is read as it is (its compute and copy ceilings are this version's), says why it has no transfers, and is
measured again by `ceilings()` the same way. The transfers are kept in a list of their own (`transfers`) beside
`ceilings`: a version that does not know them leaves the key out and still reads the entry.

The file is read as every small file the app reads back (core/input_files.py: a regular file only, a FIFO
refused without waiting, a cap on its size), and every value in it is checked: a rate that is not a finite positive
number was not measured here, and is never shown as a ceiling. A file that cannot be read or is not a ceilings file
is a CeilingsFileError, one line; it is never overwritten. Where it will be written is checked before anything is
measured, and a symbolic link there is refused, not replaced.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable

from torchperf_tui.core.errors import TorchperfError
from torchperf_tui.core.formatting import compute_rate_text
from torchperf_tui.engine.hardware.lazy_torch import torch
from torchperf_tui.core.input_files import InputFileError, NotJsonError, read_json
from torchperf_tui.core.json_checks import finite_float, is_int, json_type, shown
from torchperf_tui.core.kept_files import CEILINGS, CEILINGS_ENV, ceilings_path
from torchperf_tui.core.output_files import check_output_path, write_text
from torchperf_tui.engine.hardware.device import cpu_model
from torchperf_tui.engine.hardware.device_choice import resolve_device

# What a user does when the ceilings kept are wrong or old (C: the app's key, on any tab).
REMEASURE = "measure again with C / torchperf-tui ceilings --refresh"
FORMAT = 3  # of a kept entry: 1 (no "format" key) was one matmul per dtype; 2 had no host-device transfers
SEVERAL_WORKLOADS = 2  # the first FORMAT whose compute ceilings are the best of several workloads
WITH_TRANSFERS = 3  # the first FORMAT that measured a GPU's host-device transfers
# A ceilings file takes a few KiB a device: one far larger is not one, and is not read into memory.
MAX_CEILINGS_BYTES = 16 << 20
KINDS = ("compute", "copy", "transfer", "matmul")  # "matmul": FORMAT 1's name of a compute ceiling
OUTDATED = ("kept by an earlier torchperf-tui from one 2048x2048x2048 matmul, which models can beat: "
            + REMEASURE)
# A GPU's host-device transfers: (direction, host memory), each a ceiling of kind "transfer" whose workload is
# transfer_name(direction, memory). Pinned (page-locked) memory is what the GPU's DMA engine reads and writes directly;
# pageable memory goes through a staging buffer the driver copies it into, which is what a plain CPU tensor gets.
TRANSFERS = (("h2d", "pinned"), ("h2d", "pageable"), ("d2h", "pinned"), ("d2h", "pageable"))
TRANSFER_DTYPE = "uint8"  # the transfers move bytes
NO_TRANSFERS_ON_CPU = ("no host-device transfers on a CPU: a model there computes from the host's memory, where its "
                       "inputs already are")
NO_TRANSFERS_KEPT = ("no host-device transfers: kept by an earlier torchperf-tui, before they were measured; "
                     + REMEASURE)


def transfer_name(direction: str, memory: str) -> str:
    """'h2d pinned': the workload that gives a transfer ceiling, and how it is found again."""
    return f"{direction} {memory}"


TRANSFER_NAMES = tuple(transfer_name(direction, memory) for direction, memory in TRANSFERS)


@dataclass
class Trial:
    """A workload as it went: its rate, or why it was skipped."""

    workload: str
    size: str
    threads: int | None  # the CPU's intra-op threads; None on a GPU
    value: float | None  # FLOP/s or bytes/s; None when skipped
    median_s: float | None = None
    reps: int = 0
    skipped: str | None = None

    @classmethod
    def from_dict(cls, data: Any) -> "Trial":
        """A workload tried, as kept, every field checked (ValueError): its rate is None (skipped) or finite
        and positive."""
        data = _object(data, "a workload tried")
        value, median_s, skipped = data.get("value"), data.get("median_s"), data.get("skipped")
        if skipped is not None and not isinstance(skipped, str):
            raise ValueError(f"skipped is {shown(skipped)}, not text")
        return cls(workload=_text(data, "workload"), size=_text(data, "size"), threads=_threads(data.get("threads")),
                   value=None if value is None else _positive(value, "value"),
                   median_s=None if median_s is None else _positive(median_s, "median_s"),
                   reps=_count(data.get("reps", 0), "reps"), skipped=skipped)


@dataclass
class Ceiling:
    kind: str  # "compute" (a file of FORMAT 1 says "matmul": read as compute), "copy" or "transfer"
    dtype: str  # "float32", "tf32", "float16", "bfloat16"; the copy's element type (a transfer's: TRANSFER_DTYPE)
    value: float  # FLOP/s (compute), bytes/s (copy, read + written; transfer, moved once)
    size: str  # of the workload that gave it: "2048x2048x2048", "16x256x14x14 -> 256", "256.0 MiB"
    median_s: float  # of one repetition
    reps: int
    workload: str = "matmul"  # which workload gave it (see ceiling_measurement.Workload.name); a transfer's names it
    threads: int | None = None  # the thread count that gave it (CPU)
    tried: list[Trial] = field(default_factory=list)  # every workload measured for it, the best among them

    def __post_init__(self) -> None:
        if self.kind == "matmul":  # FORMAT 1's name: its only compute ceiling was a matmul
            self.kind = "compute"
        self.tried = [t if isinstance(t, Trial) else Trial(**t) for t in self.tried]

    @classmethod
    def from_dict(cls, data: Any) -> "Ceiling":
        """A ceiling as kept, every field checked (ValueError naming the one that is wrong): a rate that is not
        a finite positive number (NaN, inf, a negative, a string, null) is no ceiling."""
        data = _object(data, "a ceiling")
        kind = data.get("kind")
        if kind not in KINDS:
            raise ValueError(f"kind is {shown(kind)}, not one of {', '.join(KINDS)}")
        return cls(kind=kind, dtype=_text(data, "dtype"), value=_positive(data.get("value"), "value"),
                   size=_text(data, "size"), median_s=_positive(data.get("median_s"), "median_s"),
                   reps=_count(data.get("reps"), "reps"), workload=_text(data, "workload", "matmul"),
                   threads=_threads(data.get("threads")),
                   tried=[Trial.from_dict(t) for t in _list(data.get("tried", []), "tried")])

    @property
    def text(self) -> str:
        if self.kind == "compute":
            return compute_rate_text(self.value, integer=self.dtype == "int8")
        return f"{self.value / 1e9:.1f} GB/s"

    @property
    def origin(self) -> str:
        """What gave it: 'conv2d 3x3 16x256x14x14 -> 256, 2 threads'."""
        threads = f", {self.threads} thread{'s' if self.threads != 1 else ''}" if self.threads else ""
        return f"{self.workload} {self.size}{threads}"


@dataclass
class CeilingsResult:
    device: str
    key: str  # the fingerprint the result is kept under
    measured_at: float
    ceilings: list[Ceiling] = field(default_factory=list)
    cached: bool = False  # read back from the user data directory, not measured now
    path: str | None = None  # where it is kept
    format: int = FORMAT  # 1: kept by an earlier version (one matmul per dtype); 2: before the transfers
    seconds: float | None = None  # how long the measurement took
    transfers: list[Ceiling] = field(default_factory=list)  # a GPU's host-device transfers, in TRANSFERS' order

    def compute(self, dtype: str) -> Ceiling | None:
        return next((c for c in self.ceilings if c.kind == "compute" and c.dtype == dtype), None)

    def copy(self) -> Ceiling | None:
        return next((c for c in self.ceilings if c.kind == "copy"), None)

    def transfer(self, direction: str, memory: str) -> Ceiling | None:
        """The transfer ceiling of ('h2d', 'pinned'), ('d2h', 'pageable'), ...; None where none is kept."""
        name = transfer_name(direction, memory)
        return next((c for c in self.transfers if c.workload == name), None)

    @property
    def outdated(self) -> str | None:
        """Why these ceilings should be measured again (an earlier version's, from one matmul), or None."""
        return OUTDATED if self.format < SEVERAL_WORKLOADS else None

    @property
    def no_transfers(self) -> str | None:
        """Why no host-device transfer is kept: a CPU has none, or a GPU's ceilings were kept before they were
        measured; None where they are."""
        if not self.device.startswith("cuda"):
            return NO_TRANSFERS_ON_CPU
        return NO_TRANSFERS_KEPT if self.format < WITH_TRANSFERS else None

    @property
    def stale(self) -> bool:
        """Measured again by ceilings() without being asked: an earlier version's (outdated), or a GPU's kept
        before its transfers were measured."""
        return self.outdated is not None or self.no_transfers == NO_TRANSFERS_KEPT

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "outdated": self.outdated, "no_transfers": self.no_transfers}

    @classmethod
    def from_dict(cls, data: Any) -> "CeilingsResult":
        """A device's entry as kept, every field checked (ValueError naming the one that is wrong). Fields it
        does not know (a later version's) are left out."""
        data = _object(data, "an entry")
        seconds, fmt = data.get("seconds"), data.get("format", 1)
        if not is_int(fmt) or fmt < 1:
            raise ValueError(f"format is {shown(fmt)}, not a whole number from 1")
        return cls(device=_text(data, "device"), key=_text(data, "key"),
                   measured_at=finite_float(data.get("measured_at"), "measured_at"),
                   ceilings=[Ceiling.from_dict(c) for c in _list(data.get("ceilings"), "ceilings")], format=fmt,
                   seconds=None if seconds is None else _positive(seconds, "seconds", zero=True),
                   transfers=[_transfer(t) for t in _list(data.get("transfers", []), "transfers")])


def _transfer(data: Any) -> Ceiling:
    """A kept transfer ceiling: a ceiling of kind "transfer" whose workload is one of TRANSFER_NAMES."""
    ceiling = Ceiling.from_dict(data)
    if ceiling.kind != "transfer" or ceiling.workload not in TRANSFER_NAMES:
        raise ValueError(f"a transfer is {ceiling.kind} {shown(ceiling.workload)}, not one of "
                         f"{', '.join(TRANSFER_NAMES)}")
    return ceiling


class CeilingsFileError(TorchperfError):
    """A ceilings file that is not one (not JSON, not ours, an entry that is corrupt): one line that names it;
    the file is left as it is."""


class CeilingsPathError(CeilingsFileError):
    """A ceilings path that is no file to read or write (a FIFO, a device, a folder, over its cap, unreadable, a
    link or a folder that cannot be written): refused even where kept ceilings are optional (`info`)."""


def _object(data: Any, what: str) -> dict:
    if not isinstance(data, dict):
        raise ValueError(f"{what} is a JSON {json_type(data)}, not an object")
    return data


def _list(data: Any, name: str) -> list:
    if not isinstance(data, list):
        raise ValueError(f"{name} is {shown(data)}, not a list")
    return data


def _text(data: dict, name: str, default: str | None = None) -> str:
    value = data.get(name, default)
    if not isinstance(value, str):
        raise ValueError(f"{name} is {shown(value)}, not text")
    return value


def _positive(value: Any, name: str, *, zero: bool = False) -> float:
    number = finite_float(value, name)
    if number < 0 or (number == 0 and not zero):
        raise ValueError(f"{name} is {shown(value)}, not a positive number")
    return number


def _count(value: Any, name: str) -> int:
    if not is_int(value) or value < 0:
        raise ValueError(f"{name} is {shown(value)}, not a whole number")
    return value


def _threads(value: Any) -> int | None:
    if value is not None and (not is_int(value) or value < 1):
        raise ValueError(f"threads is {shown(value)}, not a thread count")
    return value


def device_key(device: "torch.device") -> str:
    """What a measured ceiling depends on: the device's name, torch, and on the CPU the thread count."""
    if device.type == "cuda":
        name = torch.cuda.get_device_name(device)
        return f"{name} | torch {torch.__version__} | cuda {torch.version.cuda}"
    import platform

    model = cpu_model()
    name = model if isinstance(model, str) else platform.machine()
    return f"{name} | torch {torch.__version__} | threads {torch.get_num_threads()}"


def kept_for(device: str, on_corrupt: Callable[[str], None] | None = None) -> CeilingsResult | None:
    """The ceilings kept for the device a run used ("cpu", "cuda:0"), without measuring anything. With
    `on_corrupt`, a ceilings file that is corrupt is said through it (one line) and taken as none kept; a path
    that is no file to read (CeilingsPathError) is raised all the same."""
    try:
        return load_ceilings(device_key(resolve_device(device)))
    except CeilingsPathError:
        raise
    except CeilingsFileError as exc:
        if on_corrupt is None:
            raise
        on_corrupt(str(exc))
        return None


# --------------------------------------------------------------------------------------------------------
# Keeping


def read_kept(path: Path | None = None) -> dict:
    """The ceilings file's entries by device key ({} when there is no file yet, or an empty one), read safely
    and before anything is measured. CeilingsFileError, in one line, for a file that cannot be read or is not
    a ceilings file; it is left as it is."""
    path = path or ceilings_path()
    what = _what(path)
    try:
        data = read_json(path, what, MAX_CEILINGS_BYTES)
    except FileNotFoundError:
        return {}
    except NotJsonError as exc:
        raise CeilingsFileError(str(exc)) from None
    except InputFileError as exc:
        raise CeilingsPathError(str(exc)) from None
    if data is None:
        return {}
    if not isinstance(data, dict) or not isinstance(data.get("devices"), dict):
        raise CeilingsFileError(f"{what} {path} is not a ceilings file (no \"devices\" object in it): move it "
                                f"away, or choose another with ${CEILINGS_ENV}")
    return data["devices"]


def load_ceilings(key: str, path: Path | None = None) -> CeilingsResult | None:
    """The ceilings kept for `key`, or None when none are. CeilingsFileError (read_kept), or when the entry
    kept for `key` is corrupt: a value in it is not what a measurement gives (a NaN, a negative, a string)."""
    path = path or ceilings_path()
    entry = read_kept(path).get(key)
    if entry is None:
        return None
    result = kept_entry(entry, path)
    result.cached, result.path = True, str(path)
    return result


def kept_entry(entry: Any, path: Path) -> CeilingsResult:
    """A kept entry read back; CeilingsFileError, naming the file, where a value in it is not a measurement's."""
    try:
        return CeilingsResult.from_dict(entry)
    except ValueError as exc:
        raise CeilingsFileError(f"{_what(path)} {path}: the entry of this device is corrupt ({exc}) and is not "
                                f"used: {REMEASURE}") from None


def _what(path: Path) -> str:
    """'the ceilings file', with the variable that chose it when one did: a user who set it long ago is told where
    the path comes from."""
    chosen = os.environ.get(CEILINGS_ENV, "").strip()
    return f"the ceilings file (${CEILINGS_ENV})" if chosen and Path(chosen).expanduser() == path else "the ceilings file"


def check_keepable(path: Path | None = None) -> Path:
    """Where ceilings would be kept, checked before they are measured: a regular file or none yet, in a writable
    folder (made if need be), not a symbolic link and not another file the app keeps. CeilingsPathError, one line,
    otherwise."""
    path = path or ceilings_path()
    try:
        return check_output_path(path, make_parents=True, own=CEILINGS)
    except TorchperfError as exc:
        raise CeilingsPathError(f"{exc}: the measured ceilings are kept there (${CEILINGS_ENV} chooses another "
                                "file); nothing was measured") from None


def save_ceilings(result: CeilingsResult, path: Path | None = None) -> Path:
    """Keep `result` under its key, beside the other devices' (written to a temporary file, then renamed: a
    link or anything but a regular file there is refused, not replaced). A file that is not a ceilings file
    is not overwritten (CeilingsFileError); an entry that is corrupt is replaced."""
    path = path or ceilings_path()
    devices = read_kept(path)
    devices[result.key] = {k: v for k, v in asdict(result).items() if k not in ("cached", "path")}
    write_text(path, json.dumps({"devices": devices}, indent=1), own=CEILINGS, make_parents=True)
    result.path = str(path)
    return path
