"""The environment a run's numbers depend on (device, driver, torch, CUDA, cuDNN, host), as a flat JSON-able
dict that goes into every history record.

Importing this module is cheap; `environment_fingerprint()` probes the device (which imports torch) once per
process and caches the probe.
"""

from __future__ import annotations

import platform
import socket
import sys
import threading
from typing import TYPE_CHECKING, Any

from torchperf_tui.engine.hardware.nvml import to_jsonable
from torchperf_tui import __version__
from torchperf_tui.engine.hardware.device import probe_device

if TYPE_CHECKING:  # only for annotations: importing it would import torch
    from torchperf_tui.engine.hardware.device import DeviceReport

_probe_lock = threading.Lock()
_cached_report: "DeviceReport | None" = None


def _device_report() -> "DeviceReport":
    """The device probe, taken once per process: NVML init and CUDA queries are not free."""
    global _cached_report
    with _probe_lock:
        if _cached_report is None:

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
        device_name, capability, gpu = cpu_model, None, None
    env = {
        "device_name": device_name,
        "compute_capability": capability,
        "gpu_count": len(gpus),
        "driver": data["driver_version"],
        "torch": data["torch_version"],
        "torchvision": _package_version("torchvision"),
        "transformers": _package_version("transformers"),  # installed versions (None: not installed); reading
        "timm": _package_version("timm"),  # package metadata imports neither
        "cuda_runtime": data["cuda_runtime"],
        "cudnn": data["cudnn_version"],
        "cpu": cpu_model,
        "cpu_threads": _torch_threads(data["cpu"]["torch_threads"]),
        "hostname": socket.gethostname(),
        "python": platform.python_version(),
        "platform": platform.platform(terse=True),
        "torchperf_tui": __version__,
    }
    if gpu:  # a gate names a changed power limit as a likely cause of a slowdown
        env["gpu_power_limit_w"] = gpu.get("power_limit_w")
    return env


def _torch_threads(probed: Any) -> Any:
    """The intra-op thread count now: the cached probe's figure goes stale if anything changed it since."""
    torch = sys.modules.get("torch")
    return torch.get_num_threads() if torch is not None else probed
