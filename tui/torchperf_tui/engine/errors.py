"""User-facing errors: each carries one line that the CLI prints and the TUI shows, never a traceback."""

from __future__ import annotations


class TorchperfError(Exception):
    """A problem with what the user asked for (not a bug): reported as one line."""


class ModelError(TorchperfError):
    """Unknown model name, a `module:factory` that fails to import or build."""


class ModelTooLarge(ModelError):
    """A model whose weights alone cannot fit the device's free memory: refused, from a build on the meta device,
    before anything is allocated."""


class ShapeError(TorchperfError):
    """A malformed input shape, or one the model rejects."""


class DeviceError(TorchperfError):
    """A device that is not there (CUDA asked for on a CPU box, a GPU index out of range)."""


class FlagError(TorchperfError):
    """A flag name or value that does not exist or cannot be applied."""


class OutOfMemory(TorchperfError):
    """The device (or the CPU memory cap) ran out of memory; the run was stopped and memory released."""


class InputTooLarge(OutOfMemory, MemoryError):
    """The input tensor alone is larger than the memory free for it: refused before the allocator is asked (it
    would fail with a C++ message that seems to blame the model). A MemoryError, so the throughput search counts
    the batch as one that does not fit."""


def first_line(exc: BaseException) -> str:
    """The first non-empty line of an exception's message (PyTorch's run to dozens of lines)."""
    lines = [line.strip() for line in str(exc).strip().splitlines() if line.strip()]
    return lines[0] if lines else type(exc).__name__


def user_message(exc: BaseException) -> str:
    """One line for a person: a TorchperfError's own message; anything else (a bug) as 'Type: first line'."""
    if isinstance(exc, TorchperfError):
        return first_line(exc)
    text = str(exc).strip()
    return f"{type(exc).__name__}: {first_line(exc)}" if text else type(exc).__name__
