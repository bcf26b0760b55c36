"""Measured ceilings: what a result holds (the most this device reached on compute per dtype and on a large
copy, with every workload tried beside it), and where it is kept. How they are measured (the workloads, the
dtypes, the thread counts) is engine/hardware/ceiling_measurement.py's.

Results are kept per device fingerprint (device name, torch, threads on the CPU) in the user data directory,
and measured again on request. On the CPU they stand in for the datasheet peaks that the OS cannot report.
A ceiling kept by an earlier version (one 2048^3 matmul, FORMAT 1) is still read, marked `outdated`, and
measured again by `ceilings()` unless asked only for what is kept.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from torchperf_tui.engine.errors import TorchperfError
from torchperf_tui.engine.lazy_torch import torch
from torchperf_tui.engine.analysis.roofline import REMEASURE

FORMAT = 2  # of a kept entry: 1 (no "format" key) was one matmul per dtype
FILENAME = "ceilings.json"
OUTDATED = ("kept by an earlier torchperf-tui from one 2048x2048x2048 matmul, which models can beat: "
            + REMEASURE)


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


@dataclass
class Ceiling:
    kind: str  # "compute" (a file of FORMAT 1 says "matmul": read as compute) or "copy"
    dtype: str  # "float32", "tf32", "float16", "bfloat16"; the copy's element type
    value: float  # FLOP/s (compute) or bytes/s (copy, read + written)
    size: str  # of the workload that gave it: "2048x2048x2048", "16x256x14x14 -> 256", "256.0 MiB"
    median_s: float  # of one repetition
    reps: int
    workload: str = "matmul"  # which workload gave it (see ceiling_measurement.Workload.name)
    threads: int | None = None  # the thread count that gave it (CPU)
    tried: list[Trial] = field(default_factory=list)  # every workload measured for it, the best among them

    def __post_init__(self) -> None:
        if self.kind == "matmul":  # FORMAT 1's name: its only compute ceiling was a matmul
            self.kind = "compute"
        self.tried = [t if isinstance(t, Trial) else Trial(**t) for t in self.tried]

    @property
    def text(self) -> str:
        if self.kind == "compute":
            return f"{self.value / 1e12:.2f} TFLOP/s"
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
    format: int = FORMAT  # 1: kept by an earlier version (one matmul per dtype)
    seconds: float | None = None  # how long the measurement took

    def compute(self, dtype: str) -> Ceiling | None:
        return next((c for c in self.ceilings if c.kind == "compute" and c.dtype == dtype), None)

    def copy(self) -> Ceiling | None:
        return next((c for c in self.ceilings if c.kind == "copy"), None)

    @property
    def outdated(self) -> str | None:
        """Why these ceilings should be measured again (an earlier version's), or None."""
        return OUTDATED if self.format < FORMAT else None

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "outdated": self.outdated}

    @classmethod
    def from_dict(cls, data: dict) -> "CeilingsResult":
        seconds = data.get("seconds")
        return cls(device=str(data["device"]), key=str(data["key"]), measured_at=float(data["measured_at"]),
                   ceilings=[Ceiling(**c) for c in data["ceilings"]], format=int(data.get("format", 1)),
                   seconds=float(seconds) if seconds is not None else None)


def device_key(device: "torch.device") -> str:
    """What a measured ceiling depends on: the device's name, torch, and on the CPU the thread count."""
    if device.type == "cuda":
        name = torch.cuda.get_device_name(device)
        return f"{name} | torch {torch.__version__} | cuda {torch.version.cuda}"
    import platform

    from torchperf_tui.engine.hardware.device import cpu_model

    model = cpu_model()
    name = model if isinstance(model, str) else platform.machine()
    return f"{name} | torch {torch.__version__} | threads {torch.get_num_threads()}"


def default_path() -> Path:
    """$TORCHPERF_CEILINGS, else the user data directory's ceilings.json."""
    if os.environ.get("TORCHPERF_CEILINGS"):
        return Path(os.environ["TORCHPERF_CEILINGS"])
    import platformdirs

    return Path(platformdirs.user_data_dir("torchperf-tui")) / FILENAME


def kept_for(device: str) -> CeilingsResult | None:
    """The ceilings kept for the device a run used ("cpu", "cuda:0"), without measuring anything."""
    from torchperf_tui.engine.workloads.inputs import resolve_device

    return load_ceilings(device_key(resolve_device(device)))


# --------------------------------------------------------------------------------------------------------
# Keeping


def load_ceilings(key: str, path: Path | None = None) -> CeilingsResult | None:
    """The ceilings kept for `key`, or None (none kept, or a file that is not ours: it is left as it is)."""
    path = path or default_path()
    try:
        data = json.loads(path.read_text())
        entry = data["devices"][key]
        result = CeilingsResult.from_dict(entry)
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None
    result.cached, result.path = True, str(path)
    return result


def save_ceilings(result: CeilingsResult, path: Path | None = None) -> Path:
    """Keep `result` under its key, beside the other devices' (written to a temporary file, then moved)."""
    path = path or default_path()
    try:
        data = json.loads(path.read_text())
        if not isinstance(data, dict) or not isinstance(data.get("devices"), dict):
            raise ValueError
    except (OSError, ValueError):
        if path.exists() and path.stat().st_size > 0:
            raise TorchperfError(f"{path} is not a ceilings file: not overwritten (move it away first)") from None
        data = {"devices": {}}
    data["devices"][result.key] = {k: v for k, v in asdict(result).items() if k not in ("cached", "path")}
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.{os.getpid()}")
    temporary.write_text(json.dumps(data, indent=1))
    temporary.replace(path)
    result.path = str(path)
    return path


def ceilings(device: str = "auto", *, refresh: bool = False, path: Path | None = None, **options) -> CeilingsResult:
    """The kept ceilings of this device, or measured now (and kept) when there are none, they are an earlier
    version's (outdated), or `refresh`."""
    from torchperf_tui.engine.workloads.inputs import resolve_device

    if not refresh:
        kept = load_ceilings(device_key(resolve_device(device)), path)
        if kept is not None and kept.outdated is None:
            return kept
    from torchperf_tui.engine.hardware.ceiling_measurement import measure_ceilings

    result = measure_ceilings(device, **options)
    save_ceilings(result, path)
    return result
