"""Backend flags as one value object, applied through a context manager that always restores them.

What each flag is, where it acts and how a user names it is the flag table's (core/flag_table.py): Flags has one
field per entry. This module is how torch holds them: each flag is set and read through the attribute of torch its
entry names, or through the appliers and readers below, and this is the only place that changes torch's global
backend state (cuDNN, deterministic algorithms, oneDNN, intra-op threads; the SDPA backends:
engine/measurements/attention_flags.py; TF32 per backend and float32 matmul precision, through torch's per-backend
fp32_precision where it has it, else allow_tf32: engine/measurements/precision_flags.py). A module-wide re-entrant
lock is held while flags are applied, so a timed run never sees its flags change under it: a second run waits until
the first has left its flags context.

User code can change that state too (a factory calling `torch.set_num_threads(1)`), and it would then leak
into every later model of the process. So the process keeps its pristine state (`pristine_state`, taken
before any user code runs), a run's flags are applied over that state (threads left empty mean its
count, not whatever the last model set), and `StateWatch` / `guarded_job` notice what user
code changed, put the state back, and say so in words a result carries (`state_notes`).
"""

from __future__ import annotations

import functools
import os
import sys
import threading
from contextlib import contextmanager
from dataclasses import asdict, dataclass, fields, replace
from typing import Any, Callable, Iterator

from torchperf_tui.core.attention_settings import allows_tf32
from torchperf_tui.core.errors import FlagError
from torchperf_tui.core.flag_table import FLAG_ENTRIES, NEEDS, FlagEntry, device_applicability, flag_entry
from torchperf_tui.engine.measurements import attention_flags as attn
from torchperf_tui.engine.measurements import precision_flags as precision

# cuBLAS is only deterministic with a fixed workspace; PyTorch raises at the first matmul otherwise.
_CUBLAS_DETERMINISTIC_WORKSPACE = ":4096:8"

_FLAGS_LOCK = threading.RLock()


def _fields_of_the_table(cls):
    """One field per entry of the flag table, in its order, with its default."""
    cls.__annotations__ = {entry.name: entry.kind if entry.default is not None else entry.kind | None
                           for entry in FLAG_ENTRIES}
    for entry in FLAG_ENTRIES:
        setattr(cls, entry.name, entry.default)
    return cls


@dataclass(frozen=True)
@_fields_of_the_table
class Flags:
    """A complete set of backend flags: a field per entry of the flag table (core/flag_table.py), defaults
    PyTorch's. `num_threads=None` is the process's own thread count (its pristine state's, see `pristine_state`),
    whatever user code set since; `sdpa` the SDPA backends allowed, as core/attention_settings.parse_sdpa writes
    them ('flash+math')."""

    @classmethod
    def current(cls) -> "Flags":
        """The flags torch runs with right now."""
        return cls(**{entry.name: _read(entry) for entry in FLAG_ENTRIES})

    def effective(self) -> "Flags":
        """These flags as torch holds them once applied: a matmul precision below 'highest' has TF32 matmul on."""
        return replace(self, tf32_matmul=True) if allows_tf32(self.matmul_precision) else self

    def resolved(self) -> "Flags":
        """These flags with the thread count they run on: the asked one, else the process's pristine count."""
        if self.num_threads is not None:
            return self
        return replace(self, num_threads=pristine_state().flags.num_threads)

    def replace(self, **changes) -> "Flags":
        """These flags with `changes`; a text value (the SDPA set, the matmul precision) checked and written as
        its parse writes it ('math+flash' -> 'flash+math')."""
        unknown = set(changes) - {f.name for f in fields(self)}
        if unknown:
            raise FlagError(f"unknown flag(s): {', '.join(sorted(unknown))}")
        return replace(self, **{name: flag_entry(name).parse(value) if flag_entry(name).kind is str else value
                                for name, value in changes.items()})

    def to_dict(self) -> dict:
        return asdict(self)

    def changed_from(self, other: "Flags") -> dict[str, tuple]:
        """Flags whose values differ: name -> (other's value, this value)."""
        return {f.name: (getattr(other, f.name), getattr(self, f.name))
                for f in fields(self) if getattr(self, f.name) != getattr(other, f.name)}

    def describe(self, device: str | None = None, against: "Flags | None" = None, *,
                 threads_used: int | None = None, against_threads: int | None = None,
                 default_threads: int | None = None, beside: "Flags | None" = None) -> str:
        """Short text of the flags that differ from PyTorch's defaults, or from `against` (those that apply on
        `device`). The thread count is always said on the CPU (or with no device), one way: "threads=2" when asked
        for, "threads=2 (default)" when left to the process (the count `threads_used` says ran, else the process's
        own, `default_threads`), "threads=default" only where neither is known. Against another set, the threads
        are said when the counts that ran (`threads_used`, `against_threads`, else the asked ones) differ; "same
        flags" when nothing does. `default_threads` also tells a default count from one the model's code set.
        `beside`: the other arm's flags, when this set is said beside them (an A/B's rows, the kernel view's
        arms): each flag the two differ in is said, at its default too, so that 'TF32 cuDNN=off' is not read beside
        'TF32 matmul=on' as two different flags changed."""
        diffs = []
        changed = self.changed_from(against or Flags())
        stated = self.changed_from(beside) if beside is not None else {}
        for name in (f.name for f in fields(self)):
            if name == "num_threads" or (name not in changed and name not in stated):
                continue
            value = getattr(self, name)
            if device is not None and not device_applicability(name, device)[0]:
                continue
            diffs.append(f"{flag_entry(name).label}={_value_text(value)}")
        mine = threads_used if threads_used is not None else self.num_threads
        left = threads_used if threads_used is not None else default_threads  # a count left to the process
        left_text = f"threads={left} (default)" if left is not None else "threads=default"
        if against is not None:
            theirs = against_threads if against_threads is not None else against.num_threads
            if mine != theirs:
                diffs.append(f"threads={mine}" if mine is not None else left_text)
            return ", ".join(diffs) if diffs else "same flags"
        on_cpu = device is None or not device.startswith("cuda")
        if on_cpu or self.num_threads is not None:
            if self.num_threads is not None:
                diffs.append(f"threads={self.num_threads}"
                             + ("" if threads_used in (None, self.num_threads) else f" (ran on {threads_used})"))
            elif default_threads not in (None, threads_used) and threads_used is not None:
                diffs.append(f"threads={threads_used} (set by the model's code; default {default_threads})")
            else:
                diffs.append(left_text)
        return ", ".join(diffs) if diffs else "defaults"


def _torch():
    import torch  # the app's UI process and the CLI's load this module without torch

    return torch


def _cuda_capability() -> tuple[int, int] | None:
    torch = _torch()
    if not torch.cuda.is_available():
        return None
    return torch.cuda.get_device_capability()


def _without_cudnn(on_cuda: bool) -> str | None:
    if not _torch().backends.cudnn.is_available():
        return "cuDNN is not available in this PyTorch build"
    return None


def _without_tf32(on_cuda: bool) -> str | None:
    capability = _cuda_capability() if on_cuda else None  # on the CPU no flag needs TF32 hardware
    if capability is not None and capability < (8, 0):
        return f"TF32 needs compute capability 8.0+, this GPU is {capability[0]}.{capability[1]}"
    return None


def _without_onednn(on_cuda: bool) -> str | None:
    if not _torch().backends.mkldnn.is_available():
        return "this PyTorch build has no oneDNN (mkldnn)"
    return None


# The one place the fallback of an older torch is said: the TF32 flags that need per-backend settings say it, in the
# sidebar, an A/B's arms and a run's notes; TF32 matmul and TF32 cuDNN act through allow_tf32 there.
WITHOUT_FP32_PRECISION = ("this PyTorch has no per-backend fp32_precision: TF32 is set through allow_tf32, which holds "
                          "cuDNN's convolutions and RNNs as one (TF32 cuDNN) and has none for oneDNN on the CPU")


def _without_fp32_precision(on_cuda: bool) -> str | None:
    return None if precision.per_backend() else WITHOUT_FP32_PRECISION


def _without_cpu_tf32(on_cuda: bool) -> str | None:
    if not on_cuda and precision.cpu_has_tf32() is False:
        return "this CPU has no AMX-FP16, which torch requires before oneDNN computes float32 in TF32"
    return None


# What a flag's entry says it needs (FlagEntry.needs): why it cannot act here, or None.
_NEEDS: dict[str, Callable[[bool], str | None]] = {"cudnn": _without_cudnn, "tf32": _without_tf32,
                                                    "onednn": _without_onednn,
                                                    "fp32_precision": _without_fp32_precision,
                                                    "cpu_tf32": _without_cpu_tf32}
if set(_NEEDS) != set(NEEDS):  # the table's words for what torch must have, each checked here
    raise TypeError(f"what a flag needs, checked here: {', '.join(_NEEDS)}; named by the table: {', '.join(NEEDS)}")


def flag_applicability(name: str, device: str) -> tuple[bool, str | None]:
    """Whether setting flag `name` changes anything for a model on `device` ("cpu"/"cuda"), and why not:
    the kind of device, then what this torch build and GPU support."""
    applies, why = device_applicability(name, device)
    if not applies:
        return applies, why
    for need in flag_entry(name).needs:
        why = _NEEDS[need](device.startswith("cuda"))
        if why:
            return False, why
    return True, None


def applicability_table() -> dict[str, dict[str, tuple[bool, str | None]]]:
    """flag_applicability for every flag on the CPU and on CUDA: what the app's UI process, which has no
    torch, is told once by the process that has it."""
    return {kind: {entry.name: flag_applicability(entry.name, kind) for entry in FLAG_ENTRIES} for kind in ("cpu", "cuda")}


def inert_flags(flags: Flags, device: str, reference: Flags | None = None) -> list[str]:
    """One line per flag set away from `reference` (default: PyTorch's defaults) that has no effect on
    `device`, e.g. cudnn.benchmark on the CPU: a user should not read a same-speed result as its effect."""
    reference = reference or Flags()
    lines = []
    for entry in FLAG_ENTRIES:
        if getattr(flags, entry.name) != getattr(reference, entry.name):
            ok, why = flag_applicability(entry.name, device)
            if not ok:
                lines.append(f"{entry.label} has no effect here: {why}")
    return lines + attn.absent_lines(flags.sdpa, device)


# -- how torch holds each flag ----------------------------------------------------------------------------

def _attribute(path: str) -> tuple[Any, str]:
    """'backends.cudnn.benchmark' -> (torch.backends.cudnn, 'benchmark')."""
    *owners, name = path.split(".")
    return functools.reduce(getattr, owners, _torch()), name


def _apply_deterministic_algorithms(flags: Flags) -> None:
    torch, wanted = _torch(), flags.deterministic_algorithms
    if wanted:
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", _CUBLAS_DETERMINISTIC_WORKSPACE)
    elif (not torch.are_deterministic_algorithms_enabled() and not torch.is_deterministic_algorithms_warn_only_enabled()
          and "torch._inductor.config" not in sys.modules):
        # Off already: torch's setter would import its compiler (torch._inductor and dynamo, over a second of CPU
        # in every measurement process) only to write the same off into the compiler's config, which is off by
        # default. Once something has imported that config, the setter runs as usual.
        return
    torch.use_deterministic_algorithms(wanted)


def _apply_threads(flags: Flags) -> None:
    if flags.num_threads is not None:
        if flags.num_threads < 1:
            raise FlagError(f"threads must be at least 1, got {flags.num_threads}")
        # The upper bound (the machine's CPUs) is checked where a count enters, options.thread_count: here
        # it would also refuse to restore torch's own default on a box whose affinity is narrower.
        _torch().set_num_threads(flags.num_threads)


# The flags that are more than an attribute of torch set and read: how each is applied (from the whole set: the
# matmul precision sets TF32 matmul with it) and read back. The TF32 flags (an entry's `fp32_precision`) are
# precision_flags' to apply and read, each from its entry, but for TF32 matmul, applied with the precision here.
_APPLIERS: dict[str, Callable[[Flags], None]] = {
    # TF32 matmul is set with the precision, which torch ties it to (the precision first, then TF32 matmul)
    "tf32_matmul": lambda flags: precision.apply_matmul_precision(flags.matmul_precision, flags.tf32_matmul),
    "deterministic_algorithms": _apply_deterministic_algorithms,
    "num_threads": _apply_threads,
    "sdpa": lambda flags: attn.apply_sdpa(flags.sdpa),
    "matmul_precision": lambda flags: None,  # set with TF32 matmul, above
}
_READERS: dict[str, Callable[[], Any]] = {
    "deterministic_algorithms": lambda: _torch().are_deterministic_algorithms_enabled(),
    "num_threads": lambda: _torch().get_num_threads(),
    "sdpa": attn.current_sdpa,
    "matmul_precision": precision.current_matmul_precision,
}


def _read(entry: FlagEntry) -> Any:
    if entry.name in _READERS:
        return entry.kind(_READERS[entry.name]())
    if entry.fp32_precision:
        return precision.tf32_on(entry)
    owner, name = _attribute(entry.torch_attr)
    return entry.kind(getattr(owner, name))


def _apply(flags: Flags) -> None:
    """Set every flag, in the table's order."""
    for entry in FLAG_ENTRIES:
        if entry.name in _APPLIERS:
            _APPLIERS[entry.name](flags)
        elif entry.fp32_precision:
            precision.apply_tf32(entry, getattr(flags, entry.name))
        else:
            owner, name = _attribute(entry.torch_attr)
            setattr(owner, name, getattr(flags, entry.name))


def _held(flags: Flags) -> Flags:
    """`flags` as this torch holds them once applied: where it has no per-backend fp32_precision, a TF32 flag that
    needs them reads as the flag that holds its allow_tf32 (TF32 RNN as TF32 cuDNN), or off where it has none."""
    if precision.per_backend():
        return flags
    holders = {entry.allow_tf32: entry.name for entry in FLAG_ENTRIES
               if entry.allow_tf32 and "fp32_precision" not in entry.needs}
    return replace(flags, **{entry.name: bool(getattr(flags, holders[entry.allow_tf32]))
                             if entry.allow_tf32 in holders else False
                             for entry in FLAG_ENTRIES if entry.fp32_precision and "fp32_precision" in entry.needs})


def _unheld_flags() -> list[str]:
    """Entries of the table torch would not know how to hold: no attribute, no TF32 settings, and no applier and
    reader here."""
    return [entry.name for entry in FLAG_ENTRIES
            if not entry.torch_attr and not entry.fp32_precision
            and not (entry.name in _APPLIERS and entry.name in _READERS)]


if _unheld_flags():  # a new entry names its torch attribute, or has its applier and reader above
    raise TypeError(f"flags with no way to apply and read them: {', '.join(_unheld_flags())}")


@contextmanager
def applied_flags(flags: Flags) -> Iterator[Flags]:
    """Run the body under `flags` (threads left empty: the process's pristine count, see `pristine_state`),
    then put back exactly what was there before, even on error."""
    import torch

    with _FLAGS_LOCK:
        previous = Flags.current()
        settings = precision.settings()  # "none" (inherit) included, which the flags alone do not say
        warn_only = torch.is_deterministic_algorithms_warn_only_enabled()
        try:
            _apply(flags.resolved())
            yield flags
        finally:
            _apply(previous)
            precision.restore(settings)
            if previous.deterministic_algorithms and warn_only:
                torch.use_deterministic_algorithms(True, warn_only=True)


# -- the process's global torch state, and what user code did to it --------------------------------------

# What TorchState holds beyond the flags, and how a change of each is said.
_STATE_LABELS = {"num_threads": "torch threads", "interop_threads": "inter-op threads",
                 "default_dtype": "the default dtype", "grad_enabled": "grad mode",
                 "warn_only": "deterministic algorithms' warn-only mode", "fp32_precision": "fp32 precision"}
# The flags the per-backend fp32 precision settings hold: a change they show is said by them, not twice.
_HELD_BY_PRECISION = {entry.name for entry in FLAG_ENTRIES if entry.fp32_precision} | {"matmul_precision"}


@dataclass(frozen=True)
class TorchState:
    """Torch's process-wide settings a model's code can change behind a run's back: every flag (threads
    included, as a count), the inter-op threads, the default dtype, grad mode, deterministic warn-only, and every
    per-backend fp32 precision setting as read ("none" included, a change no flag shows: oneDNN's convolutions
    to bf16)."""

    flags: Flags
    interop_threads: int
    default_dtype: str
    grad_enabled: bool
    warn_only: bool
    fp32_precision: tuple[tuple[str, str], ...] = ()  # precision_flags.settings(): (setting, value), parents first

    @classmethod
    def current(cls) -> "TorchState":
        import torch

        return cls(flags=Flags.current(), interop_threads=int(torch.get_num_interop_threads()),
                   default_dtype=str(torch.get_default_dtype()).removeprefix("torch."),
                   grad_enabled=bool(torch.is_grad_enabled()),
                   warn_only=bool(torch.is_deterministic_algorithms_warn_only_enabled()),
                   fp32_precision=precision.settings())

    def values(self) -> dict[str, object]:
        return {**self.flags.to_dict(), "interop_threads": self.interop_threads,
                "default_dtype": self.default_dtype, "grad_enabled": self.grad_enabled, "warn_only": self.warn_only,
                "fp32_precision": self.fp32_precision}

    def changes_from(self, expected: "TorchState") -> dict[str, tuple]:
        """Settings whose values differ: name -> (expected, this state's value). Of the fp32 precision settings,
        those that differ, and only where no flag they hold changed with them."""
        mine, theirs = self.values(), expected.values()
        changes = {name: (theirs[name], value) for name, value in mine.items() if value != theirs[name]}
        if "fp32_precision" in changes:
            before, now = changes.pop("fp32_precision")
            if not _HELD_BY_PRECISION & set(changes):
                changes["fp32_precision"] = (tuple(pair for pair in before if pair not in now),
                                             tuple(pair for pair in now if pair not in before))
        return changes


_PRISTINE: TorchState | None = None


def pristine_state() -> TorchState:
    """The process's pristine state, taken at the first call: the measurement process calls it (through
    `guarded_job`) before its first job, so before any user code; an engine call from a script takes it at
    its first run, before that run builds its model."""
    global _PRISTINE
    with _FLAGS_LOCK:
        if _PRISTINE is None:
            _PRISTINE = TorchState.current()
        return _PRISTINE


def asked_state(flags: Flags) -> TorchState:
    """The state a run under `flags` should see from its first iteration to its last: the pristine state with
    the flags applied (as `applied_flags` does), threads left empty being its count."""
    base = pristine_state()
    threads = flags.num_threads if flags.num_threads is not None else base.flags.num_threads
    # Setting deterministic algorithms on or off (as applying flags does) clears warn-only.
    return replace(base, flags=replace(_held(flags.effective()), num_threads=threads), warn_only=False)


def _label(name: str) -> str:
    return _STATE_LABELS.get(name) or flag_entry(name).label


def _value_text(value: object) -> str:
    if isinstance(value, tuple):  # fp32 precision settings: 'cudnn.conv=ieee, mkldnn.conv=bf16'
        return ", ".join(f"{'all' if path == 'backends' else path.removeprefix('backends.')}={setting}"
                         for path, setting in value) or "as before"
    return ("on" if value else "off") if isinstance(value, bool) else str(value)


def change_text(name: str, expected: object, actual: object) -> str:
    """'torch threads to 1 (asked: 2)'."""
    return f"{_label(name)} to {_value_text(actual)} (asked: {_value_text(expected)})"


def restore_state(state: TorchState) -> list[str]:
    """Put `state` back; the settings torch cannot set again in this process (inter-op threads, once any
    parallel work has run), as lines."""
    import torch

    with _FLAGS_LOCK:
        _apply(state.flags)
        precision.restore(state.fp32_precision)
        if state.warn_only and state.flags.deterministic_algorithms:
            torch.use_deterministic_algorithms(True, warn_only=True)
        dtype = getattr(torch, state.default_dtype, None)
        if isinstance(dtype, torch.dtype) and torch.get_default_dtype() != dtype:
            torch.set_default_dtype(dtype)
        torch.set_grad_enabled(state.grad_enabled)
        stuck = []
        if torch.get_num_interop_threads() != state.interop_threads:
            try:
                torch.set_num_interop_threads(state.interop_threads)
            except RuntimeError:  # torch allows it once, before any inter-op work
                stuck.append(f"{_label('interop_threads')} cannot be set back to {state.interop_threads} in this "
                             f"process (torch allows it once)")
        return stuck


class StateWatch:
    """What the model's code did to torch's global state during one measurement, in words, and the state put
    back at the end.

    Made before the model is built; `built()` once it is (its import and factory ran: what they changed is
    overridden by the run's flags context, and said); `ran(flags)` inside the flags context after the timed
    iterations (what the forward changed there was in effect for some of them: the samples were not all
    measured under what was asked); `close()` puts back the state found at the start. `notes` says each
    change once.
    """

    def __init__(self) -> None:
        pristine_state()  # before any user code, in a process that has not taken it yet
        self.start = TorchState.current()
        self.notes: list[str] = []
        self._said: set[str] = set()

    def _note(self, changes: dict[str, tuple], text) -> None:
        for name, (expected, actual) in changes.items():
            if name not in self._said:
                self._said.add(name)
                self.notes.append(text(name, expected, actual))

    def built(self) -> None:
        self._note(TorchState.current().changes_from(self.start),
                   lambda n, e, a: f"the model's code (import or factory) set {_label(n)} to {_value_text(a)}: "
                                   f"overridden for the run ({_value_text(e)}) and put back after it")

    def ran(self, flags: Flags, during: str = "the run") -> None:
        changes = TorchState.current().changes_from(asked_state(flags))
        changes.pop("grad_enabled", None)  # the run's own: inference runs without gradients
        changes.pop("fp32_precision", None)  # the run's flags wrote them (a change is said by the flags they hold)
        self._note(changes,
                   lambda n, e, a: f"the model's code set {change_text(n, e, a)} during {during}: samples "
                                   f"measured under a state the run did not ask for; put back after it")

    def close(self) -> list[str]:
        """Put back the state found at the start; returns `notes`."""
        changes = TorchState.current().changes_from(self.start)
        if changes:
            self._note(changes, lambda n, e, a: f"the model's code set {_label(n)} to {_value_text(a)}; "
                                                f"put back to {_value_text(e)} after the run")
            self.notes += restore_state(self.start)
        return self.notes


def import_changes(module: str, before: TorchState) -> list[str]:
    """What importing the model's `module` changed of torch's state since `before`, in words, put back to
    `before` (the process's own) so the job runs from it: a module that sets threads at import must not pass
    for the process's default."""
    changes = TorchState.current().changes_from(before)
    if not changes:
        return []
    notes = [f"the model's module {module} set {_label(name)} to {_value_text(actual)} at import: put back to "
             f"{_value_text(expected)} for the job" for name, (expected, actual) in changes.items()]
    return notes + restore_state(before)


def guarded_job(call: Callable[[], tuple[Any, dict]]) -> tuple[Any, dict]:
    """Run one job of the measurement process (`call` returns (result, extra)) from the process's pristine state
    state and put that state back after it: no model's settings leak into the next job.

    What user code changed is said on the result: added to its `state_notes` when it has that field (runs
    whose engine runner watched for itself have said it already), else in `extra["state_notes"]`."""
    pristine = pristine_state()
    if TorchState.current() != pristine:  # left by code outside any job (never expected): not this job's doing
        restore_state(pristine)
    try:
        result, extra = call()
    finally:
        changes = TorchState.current().changes_from(pristine)
        stuck = restore_state(pristine) if changes else []
    if not changes:
        return result, extra
    said = " ".join(getattr(result, "state_notes", ()) or ())
    notes = [f"user code set {_label(name)} to {_value_text(actual)}; put back to {_value_text(expected)} "
             "after the job" for name, (expected, actual) in changes.items() if _label(name) not in said] + stuck
    if notes and hasattr(result, "state_notes"):
        result.state_notes = [*result.state_notes, *notes]
    elif notes:
        extra = {**extra, "state_notes": notes}
    return result, extra
