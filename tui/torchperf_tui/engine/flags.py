"""Backend flags as one value object, applied through a context manager that always restores them.

This is the only place that changes torch's global backend state (cuDNN, TF32, deterministic algorithms,
oneDNN, intra-op threads). A module-wide re-entrant lock is held while flags are applied, so a timed run
never sees its flags change under it: a second run waits until the first has left its flags context.
"""

from __future__ import annotations

import os
import threading
from contextlib import contextmanager
from dataclasses import asdict, dataclass, fields, replace
from typing import Iterator

from torchperf_tui.engine.errors import FlagError

# cuBLAS is only deterministic with a fixed workspace; PyTorch raises at the first matmul otherwise.
_CUBLAS_DETERMINISTIC_WORKSPACE = ":4096:8"

_FLAGS_LOCK = threading.RLock()


@dataclass(frozen=True)
class FlagSpec:
    """What a flag is, for help texts and the UI's switches."""

    name: str
    label: str
    kind: type  # bool or int
    device: str  # "cuda", "cpu" or "any": where the flag has an effect
    help: str


FLAG_SPECS: tuple[FlagSpec, ...] = (
    FlagSpec("cudnn_benchmark", "cudnn.benchmark", bool, "cuda",
             "autotune conv algorithms per input shape (wins on fixed shapes, re-tunes on new ones)"),
    FlagSpec("cudnn_deterministic", "cudnn.deterministic", bool, "cuda",
             "only deterministic cuDNN conv algorithms"),
    FlagSpec("cudnn_enabled", "cudnn.enabled", bool, "cuda",
             "use cuDNN at all (off: PyTorch's native CUDA kernels)"),
    FlagSpec("tf32_matmul", "TF32 matmul", bool, "cuda",
             "allow TF32 tensor cores for fp32 matmuls (Ampere and newer)"),
    FlagSpec("tf32_cudnn", "TF32 cuDNN", bool, "cuda",
             "allow TF32 tensor cores for fp32 convolutions (Ampere and newer)"),
    FlagSpec("deterministic_algorithms", "deterministic algos", bool, "any",
             "torch.use_deterministic_algorithms: error on ops with no deterministic version"),
    FlagSpec("mkldnn_enabled", "oneDNN (mkldnn)", bool, "cpu",
             "use oneDNN kernels for CPU convolutions and matmuls"),
    FlagSpec("num_threads", "threads", int, "cpu",
             "intra-op CPU threads (torch.set_num_threads); empty leaves the current value"),
)
_SPECS_BY_NAME = {spec.name: spec for spec in FLAG_SPECS}


@dataclass(frozen=True)
class Flags:
    """A complete set of backend flags. `num_threads=None` leaves the thread count as it is."""

    cudnn_benchmark: bool = False
    cudnn_deterministic: bool = False
    cudnn_enabled: bool = True
    tf32_matmul: bool = False
    tf32_cudnn: bool = True
    deterministic_algorithms: bool = False
    mkldnn_enabled: bool = True
    num_threads: int | None = None

    @classmethod
    def current(cls) -> "Flags":
        """The flags torch runs with right now."""
        import torch

        return cls(
            cudnn_benchmark=bool(torch.backends.cudnn.benchmark),
            cudnn_deterministic=bool(torch.backends.cudnn.deterministic),
            cudnn_enabled=bool(torch.backends.cudnn.enabled),
            tf32_matmul=bool(torch.backends.cuda.matmul.allow_tf32),
            tf32_cudnn=bool(torch.backends.cudnn.allow_tf32),
            deterministic_algorithms=bool(torch.are_deterministic_algorithms_enabled()),
            mkldnn_enabled=bool(torch.backends.mkldnn.enabled),
            num_threads=torch.get_num_threads(),
        )

    def replace(self, **changes) -> "Flags":
        unknown = set(changes) - set(_SPECS_BY_NAME)
        if unknown:
            raise FlagError(f"unknown flag(s): {', '.join(sorted(unknown))}")
        return replace(self, **changes)

    def to_dict(self) -> dict:
        return asdict(self)

    def changed_from(self, other: "Flags") -> dict[str, tuple]:
        """Flags whose values differ: name -> (other's value, this value)."""
        return {f.name: (getattr(other, f.name), getattr(self, f.name))
                for f in fields(self) if getattr(self, f.name) != getattr(other, f.name)}

    def describe(self, device: str | None = None, against: "Flags | None" = None) -> str:
        """Short text of the flags that differ from PyTorch's defaults, or from `against` (those that apply on
        `device`): "defaults" (or "same flags") when none do."""
        diffs = []
        for name, (_, value) in self.changed_from(against or Flags()).items():
            if name == "num_threads":
                continue
            if device is not None and not device_applicability(name, device)[0]:
                continue
            label = _SPECS_BY_NAME[name].label
            diffs.append(f"{label}={'on' if value else 'off'}")
        if self.num_threads != (against.num_threads if against is not None else None):
            diffs.append(f"threads={self.num_threads or 'auto'}")
        return ", ".join(diffs) if diffs else ("same flags" if against is not None else "defaults")


def flag_spec(name: str) -> FlagSpec:
    try:
        return _SPECS_BY_NAME[name]
    except KeyError:
        raise FlagError(f"unknown flag {name!r}: known flags are {', '.join(_SPECS_BY_NAME)}") from None


def _cuda_capability() -> tuple[int, int] | None:
    import torch

    if not torch.cuda.is_available():
        return None
    return torch.cuda.get_device_capability()


def device_applicability(name: str, device: str) -> tuple[bool, str | None]:
    """Whether flag `name` is a setting of the kind of device (`"cpu"`/`"cuda"`) at all: no torch needed, so
    `Flags.describe` can run in the app's UI process."""
    spec = flag_spec(name)
    on_cuda = device.startswith("cuda")
    if spec.device == "cuda" and not on_cuda:
        return False, "a CUDA setting: no effect on the CPU"
    if spec.device == "cpu" and on_cuda:
        if name == "num_threads":
            return False, "sets CPU threads; the model runs on the GPU"
        return False, "oneDNN runs CPU ops only"
    return True, None


def flag_applicability(name: str, device: str) -> tuple[bool, str | None]:
    """Whether setting flag `name` changes anything for a model on `device` ("cpu"/"cuda"), and why not:
    the kind of device, then what this torch build and GPU support."""
    applies, why = device_applicability(name, device)
    if not applies:
        return applies, why
    import torch

    if name.startswith("cudnn_") or name == "tf32_cudnn":
        if not torch.backends.cudnn.is_available():
            return False, "cuDNN is not available in this PyTorch build"
    if name.startswith("tf32_"):
        capability = _cuda_capability()
        if capability is not None and capability < (8, 0):
            return False, f"TF32 needs compute capability 8.0+, this GPU is {capability[0]}.{capability[1]}"
    if name == "mkldnn_enabled" and not torch.backends.mkldnn.is_available():
        return False, "this PyTorch build has no oneDNN (mkldnn)"
    return True, None


def applicability_table() -> dict[str, dict[str, tuple[bool, str | None]]]:
    """flag_applicability for every flag on the CPU and on CUDA: what the app's UI process, which has no
    torch, is told once by the process that has it."""
    return {kind: {spec.name: flag_applicability(spec.name, kind) for spec in FLAG_SPECS} for kind in ("cpu", "cuda")}


def inert_flags(flags: Flags, device: str, reference: Flags | None = None) -> list[str]:
    """One line per flag set away from `reference` (default: PyTorch's defaults) that has no effect on
    `device`, e.g. cudnn.benchmark on the CPU: a user should not read a same-speed result as its effect."""
    reference = reference or Flags()
    lines = []
    for spec in FLAG_SPECS:
        if getattr(flags, spec.name) != getattr(reference, spec.name):
            ok, why = flag_applicability(spec.name, device)
            if not ok:
                lines.append(f"{spec.label} has no effect here: {why}")
    return lines


def _apply(flags: Flags) -> None:
    import torch

    torch.backends.cudnn.benchmark = flags.cudnn_benchmark
    torch.backends.cudnn.deterministic = flags.cudnn_deterministic
    torch.backends.cudnn.enabled = flags.cudnn_enabled
    torch.backends.cuda.matmul.allow_tf32 = flags.tf32_matmul
    torch.backends.cudnn.allow_tf32 = flags.tf32_cudnn
    if flags.deterministic_algorithms:
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", _CUBLAS_DETERMINISTIC_WORKSPACE)
    torch.use_deterministic_algorithms(flags.deterministic_algorithms)
    torch.backends.mkldnn.enabled = flags.mkldnn_enabled
    if flags.num_threads is not None:
        if flags.num_threads < 1:
            raise FlagError(f"threads must be at least 1, got {flags.num_threads}")
        # The upper bound (the machine's CPUs) is checked where a count enters, options.thread_count: here
        # it would also refuse to restore torch's own default on a box whose affinity is narrower.
        torch.set_num_threads(flags.num_threads)


@contextmanager
def applied_flags(flags: Flags) -> Iterator[Flags]:
    """Run the body under `flags`, then put back exactly what was there before, even on error."""
    import torch

    with _FLAGS_LOCK:
        previous = Flags.current()
        warn_only = torch.is_deterministic_algorithms_warn_only_enabled()
        try:
            _apply(flags)
            yield flags
        finally:
            _apply(previous)
            if previous.deterministic_algorithms and warn_only:
                torch.use_deterministic_algorithms(True, warn_only=True)
