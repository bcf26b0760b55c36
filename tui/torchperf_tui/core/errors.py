"""User-facing errors: each carries one line that the CLI prints and the TUI shows, never a traceback."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

# The program's name, as its errors and notes begin ("torchperf-tui: error: ...").
PROG = "torchperf-tui"


@dataclass(frozen=True)
class Remedy:
    """A setting the user can change to get past a refusal, named by its key, which is the CLI option's without
    the dashes ('model_args' is --model-args; the app names the field: wording/refusals.py). `action`: "give" the
    `value` ('num_hidden_layers=2', '64 or less'), "use" the setting (no value), or "clear" it; `purpose` follows
    ('for fewer layers'). A `setting` of None is said as the value alone, in every front ('a smaller model')."""

    setting: str | None
    value: str = ""
    purpose: str = ""
    action: str = "give"

    def cli_words(self) -> str:
        """The remedy as the command line says it, without its verb: '--model-args num_hidden_layers=2 for fewer
        layers'."""
        option = f"--{self.setting.replace('_', '-')}" if self.setting else ""
        return " ".join(part for part in (option, self.value if self.action == "give" else "", self.purpose) if part)


# A remedy's verb, by its action, in the words of each front end ("clear" is the app's word for leaving one out).
CLI_VERBS = {"give": "give", "use": "use", "clear": "leave out"}


def remedies_text(clauses: Iterable[tuple[str, str]]) -> str:
    """(verb, words) clauses as one remedy sentence, a verb said once for a run of clauses that share it: 'give
    --model-args num_hidden_layers=2 for fewer layers, or --dtype bfloat16 for half the bytes'."""
    parts, previous = [], None
    for verb, words in clauses:
        parts.append(words if verb == previous else f"{verb} {words}")
        previous = verb
    return ", or ".join(parts)


class TorchperfError(Exception):
    """A problem with what the user asked for (not a bug): reported as one line. `remedies`: what the user can
    change to get past it (Remedy), said after the refusal in the CLI's words here (str) and in the app's by
    wording/refusals.py; `refusal` is the message without them."""

    def __init__(self, *args, remedies: Iterable[Remedy] = ()) -> None:
        super().__init__(*args)
        self.remedies = tuple(remedies)

    @property
    def refusal(self) -> str:
        return super().__str__()

    def __str__(self) -> str:
        if not self.remedies:
            return self.refusal
        return f"{self.refusal}; " + remedies_text((CLI_VERBS[r.action], r.cli_words()) for r in self.remedies)


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


class MeasurementBug(Exception):
    """A job failed in the measurement process with an error that is not the user's (a bug): one line
    'Type: message', exit 1."""
