"""Every custom Message of the app: small dataclasses, posted by workers and widgets.

Workers run in threads and post these to the app (post_message is thread-safe); widgets post
the user's choices. High-frequency telemetry may replace an older unhandled tick; timing
samples are batched by the worker (about every 100 ms), never one message per iteration.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from textual.message import Message


@dataclass
class EngineLoaded(Message):
    """The engine modules were imported in a worker; `missing` maps module -> why it is not usable."""

    missing: dict[str, str] = field(default_factory=dict)


@dataclass
class DeviceProbed(Message):
    """The device report (a DeviceReport) is ready."""

    report: Any


@dataclass
class CatalogueLoaded(Message):
    """The model catalogue (list of ModelEntry) is ready."""

    entries: list


@dataclass
class ModelChosen(Message):
    """The user picked a model spec (a torchvision name or module:factory)."""

    spec: str


@dataclass
class InputSettingsChanged(Message):
    """The user changed the input shape, batch, dtype or channels_last."""


@dataclass
class ModelAnalysed(Message):
    """The complexity analysis of a model finished."""

    spec: str
    entry: Any
    complexity: Any


@dataclass
class ModelFailed(Message):
    """Resolving or analysing a model failed; `error` is a one-line message."""

    spec: str
    error: str


@dataclass
class FlagChanged(Message):
    """The user flipped a flag switch (or chose a thread count)."""

    name: str
    value: Any


@dataclass
class DeviceChosen(Message):
    """The user chose another device in the device selector ('cpu', 'cuda:N')."""

    device: str


@dataclass
class SamplesArrived(Message):
    """A batch of iteration times from a timing run, as the measurement process sent them."""

    run_id: int
    phase: str
    index: int
    total: int
    samples_ms: list[float]
    first_seen: list[bool] = field(default_factory=list)  # timed phase: whether each sample met a new shape
    memory_points: list[tuple] = field(default_factory=list)  # (time, allocated, reserved) between iterations
    memory_kind: str = ""  # "cuda-allocator" or "rss"


@dataclass
class RunFinished(Message):
    """A timing run ended (complete or cancelled) with its TimingResult."""

    run_id: int
    result: Any


@dataclass
class RunFailed(Message):
    """A timing run raised; `error` is a one-line message. `cancelled`: it was replaced before it began."""

    run_id: int
    error: str
    cancelled: bool = False


@dataclass
class TelemetryTick(Message):
    """A fresh TelemetrySample and the sampler's history (the newest tick replaces an unhandled older one)."""

    sample: Any
    history: list

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, TelemetryTick)


@dataclass
class MemoryReleased(Message):
    """release_memory finished; `report` is a ReleaseReport."""

    report: Any


@dataclass
class EngineProblem(Message):
    """Something in a worker failed outside a run: `where` names the part, `error` is one line."""

    where: str
    error: str


@dataclass
class RooflineReady(Message):
    """The roofline of a finished timing run (a RooflineResult), or why it could not be computed."""

    run_id: int
    result: Any = None
    error: str | None = None


@dataclass
class BatchTried(Message):
    """One batch size tried by a throughput search (an engine.throughput.BatchTry)."""

    search_id: int
    batch_try: Any


@dataclass
class ThroughputFinished(Message):
    """A throughput search ended (complete or cancelled) with its ThroughputResult."""

    search_id: int
    result: Any


@dataclass
class ProfileFinished(Message):
    """A profiler run ended with its ProfileResult (ops, totals, the Chrome trace path)."""

    profile_id: int
    result: Any


@dataclass
class RunOptionChanged(Message):
    """The user changed a run option: `name` is "shapes", "compile" or "flip"; `value` its new value."""

    name: str
    value: Any


@dataclass
class ComparisonBlock(Message):
    """One block of an interleaved A/B comparison finished: `arm` is "A" or "B"."""

    ab_id: int
    arm: str
    index: int
    total: int
    samples_ms: list[float]
    batch: int = 1  # items per iteration, for the arm's items/s


@dataclass
class ComparisonFinished(Message):
    """An interleaved A/B comparison ended (complete or cancelled) with its ABResult."""

    ab_id: int
    result: Any


@dataclass
class KernelsFinished(Message):
    """The per-convolution kernel comparison of two flag sets (a KernelComparison)."""

    job_id: int
    result: Any


@dataclass
class CheckFinished(Message):
    """A determinism check (DeterminismReport) or a memory snapshot (MemorySnapshotResult) finished."""

    kind: str  # "determinism" or "memsnap"
    job_id: int
    result: Any


@dataclass
class AnalysisFailed(Message):
    """A search, profile, comparison or check raised: `kind` names it, `error` is one line."""

    kind: str
    job_id: int
    error: str


@dataclass
class HistoryChanged(Message):
    """A run was appended to the history file."""


@dataclass
class MeasurementEvent(Message):
    """An event from the measurement process (worker/protocol.py), posted by its reader thread."""

    event: Any


@dataclass
class MeasurementNotice(Message):
    """One line about the measurement process itself: it died and was replaced, it could not start."""

    text: str
