"""Which device a run uses ('auto', 'cpu', 'cuda:N' resolved against what this machine has) and the memory free
there for a new tensor. torch is imported by the functions, not here: the UI process names devices without it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from torchperf_tui.core.errors import DeviceError

if TYPE_CHECKING:
    import torch


def resolve_device(name: str = "auto") -> "torch.device":
    """'auto' picks CUDA when present; asking for CUDA on a box without it is a DeviceError."""
    import torch

    name = (name or "auto").strip().lower()
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cpu":
        return torch.device("cpu")
    if name.startswith("cuda"):
        if not torch.cuda.is_available():
            raise DeviceError("CUDA was asked for, but no CUDA device is available on this machine")
        dev = torch.device(name)
        if dev.index is not None and dev.index >= torch.cuda.device_count():
            raise DeviceError(f"{name}: only {torch.cuda.device_count()} CUDA device(s) present")
        return dev
    raise DeviceError(f"unknown device {name!r}: use cpu, cuda or cuda:N")


def free_bytes(device: "torch.device | str") -> int | None:
    """Memory free for a new tensor: the GPU's free memory (CUDA), or the RAM the OS calls available (CPU);
    None when it cannot be told."""
    import torch

    device = torch.device(device)
    try:
        if device.type == "cuda":
            return int(torch.cuda.mem_get_info(device)[0])
        import psutil

        return int(psutil.virtual_memory().available)
    except Exception:  # noqa: BLE001 - no figure: the allocator decides, as before
        return None
