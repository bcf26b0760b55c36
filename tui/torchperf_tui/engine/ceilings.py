"""Measured ceilings: what this device reaches on a large matrix multiply per dtype, and on a large copy.

A datasheet peak says what the silicon could do; a measured ceiling says what this box does with this torch
(its BLAS, its clocks under load, its memory channels). Each is a short measurement: a warm-up, then
`reps` timed repetitions (CUDA events on a GPU, perf_counter on the CPU), their median.

- matmul: C = A @ B of n x n matrices, 2 n^3 FLOPs. fp32 on the CPU; on a GPU fp32 (TF32 off), tf32, fp16 and
  bf16. The TF32 setting is restored afterwards.
- copy: dst.copy_(src) of a large buffer; bandwidth counts the bytes read and the bytes written (2x size).

Results are kept per device fingerprint (device name, torch, threads on the CPU) in the user data directory,
and measured again on request. On the CPU they stand in for the datasheet peaks that the OS cannot report.
"""

from __future__ import annotations

import json
import os
import statistics
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable

from torchperf_tui.engine.errors import TorchperfError
from torchperf_tui.engine.lazy_torch import torch

CPU_MATMUL_N = 2048
GPU_MATMUL_N = 8192
CPU_COPY_BYTES = 256 * 2**20
GPU_COPY_BYTES = 2 * 2**30
FILENAME = "ceilings.json"
GPU_DTYPES = ("float32", "tf32", "float16", "bfloat16")


@dataclass
class Ceiling:
    kind: str  # "matmul" or "copy"
    dtype: str  # "float32", "tf32", "float16", "bfloat16"; the copy's element type
    value: float  # FLOP/s (matmul) or bytes/s (copy, read + written)
    size: str  # "2048x2048x2048", "256 MiB"
    median_s: float  # of one repetition
    reps: int

    @property
    def text(self) -> str:
        if self.kind == "matmul":
            return f"{self.value / 1e12:.2f} TFLOP/s"
        return f"{self.value / 1e9:.1f} GB/s"


@dataclass
class CeilingsResult:
    device: str
    key: str  # the fingerprint the result is kept under
    measured_at: float
    ceilings: list[Ceiling] = field(default_factory=list)
    cached: bool = False  # read back from the user data directory, not measured now
    path: str | None = None  # where it is kept

    def matmul(self, dtype: str) -> Ceiling | None:
        return next((c for c in self.ceilings if c.kind == "matmul" and c.dtype == dtype), None)

    def copy(self) -> Ceiling | None:
        return next((c for c in self.ceilings if c.kind == "copy"), None)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> "CeilingsResult":
        return cls(device=str(data["device"]), key=str(data["key"]), measured_at=float(data["measured_at"]),
                   ceilings=[Ceiling(**c) for c in data["ceilings"]])


def device_key(device: "torch.device") -> str:
    """What a measured ceiling depends on: the device's name, torch, and on the CPU the thread count."""
    if device.type == "cuda":
        name = torch.cuda.get_device_name(device)
        return f"{name} | torch {torch.__version__} | cuda {torch.version.cuda}"
    import platform

    from torchperf_tui.engine.device import cpu_model

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
    from torchperf_tui.engine.inputs import resolve_device

    return load_ceilings(device_key(resolve_device(device)))


def _timer(device: "torch.device") -> Callable[[Callable[[], object]], float]:
    def cuda(fn: Callable[[], object]) -> float:
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        return start.elapsed_time(end) / 1e3

    def cpu(fn: Callable[[], object]) -> float:
        t0 = time.perf_counter()
        fn()
        return time.perf_counter() - t0

    return cuda if device.type == "cuda" else cpu


def _median_seconds(fn: Callable[[], object], device: "torch.device", reps: int, warmup: int,
                    cancelled: Callable[[], bool]) -> float:
    timer = _timer(device)
    for _ in range(warmup):
        fn()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    times = []
    for _ in range(reps):
        if cancelled():
            raise TorchperfError("ceilings: cancelled")
        times.append(timer(fn))
    return statistics.median(times)


def measure_ceilings(device: str = "auto", *, matmul_n: int | None = None, copy_bytes: int | None = None,
                     reps: int = 10, warmup: int = 2, should_cancel: Callable[[], bool] | None = None,
                     on_progress: Callable[[str], None] | None = None) -> CeilingsResult:
    """Measure the matmul ceiling per dtype and the copy bandwidth on `device`, now."""
    from torchperf_tui.engine.inputs import resolve_device

    dev = resolve_device(device)
    cancelled = should_cancel or (lambda: False)
    said = on_progress or (lambda what: None)
    cuda = dev.type == "cuda"
    n = matmul_n or (GPU_MATMUL_N if cuda else CPU_MATMUL_N)
    result = CeilingsResult(device=str(dev), key=device_key(dev), measured_at=time.time())
    generator = torch.Generator(device=dev).manual_seed(0)
    with torch.inference_mode():
        for dtype_name in (GPU_DTYPES if cuda else ("float32",)):
            said(f"matmul {dtype_name} {n}x{n}x{n}")
            dtype = torch.float32 if dtype_name in ("float32", "tf32") else getattr(torch, dtype_name)
            a = torch.randn(n, n, device=dev, dtype=dtype, generator=generator)
            b = torch.randn(n, n, device=dev, dtype=dtype, generator=generator)
            before = torch.backends.cuda.matmul.allow_tf32
            torch.backends.cuda.matmul.allow_tf32 = dtype_name == "tf32"
            try:
                seconds = _median_seconds(lambda: torch.mm(a, b), dev, reps, warmup, cancelled)
            finally:
                torch.backends.cuda.matmul.allow_tf32 = before
            result.ceilings.append(Ceiling("matmul", dtype_name, 2 * n**3 / seconds, f"{n}x{n}x{n}", seconds, reps))
            del a, b
        size = copy_bytes or (GPU_COPY_BYTES if cuda else CPU_COPY_BYTES)
        said(f"copy {size / 2**20:.0f} MiB")
        src = torch.empty(size // 4, dtype=torch.float32, device=dev).uniform_(generator=generator)
        dst = torch.empty_like(src)
        seconds = _median_seconds(lambda: dst.copy_(src), dev, reps, warmup, cancelled)
        result.ceilings.append(Ceiling("copy", "float32", 2 * src.numel() * 4 / seconds,
                                       f"{src.numel() * 4 / 2**20:.0f} MiB", seconds, reps))
        del src, dst
    return result


def load_ceilings(key: str, path: Path | None = None) -> CeilingsResult | None:
    """The ceilings kept for `key`, or None (none kept, or a file that is not ours: it is left as it is)."""
    path = path or default_path()
    try:
        data = json.loads(path.read_text())
        entry = data["devices"][key]
        result = CeilingsResult.from_dict(entry)
    except (OSError, ValueError, KeyError, TypeError):
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
    data["devices"][result.key] = {k: v for k, v in result.to_dict().items() if k not in ("cached", "path")}
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.{os.getpid()}")
    temporary.write_text(json.dumps(data, indent=1))
    temporary.replace(path)
    result.path = str(path)
    return path


def ceilings(device: str = "auto", *, refresh: bool = False, path: Path | None = None, **options) -> CeilingsResult:
    """The kept ceilings of this device, or measured now (and kept) when there are none or `refresh`."""
    from torchperf_tui.engine.inputs import resolve_device

    if not refresh:
        kept = load_ceilings(device_key(resolve_device(device)), path)
        if kept is not None:
            return kept
    result = measure_ceilings(device, **options)
    save_ceilings(result, path)
    return result
