"""What the UI remembers about timing runs: one LiveRun per run, the last few kept for comparing."""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Callable

from torchperf_tui.app.setup_diff import differences
from torchperf_tui.core.run_option_table import run_option

MAX_RUNS = 8
# The UI process's CPU over a run, in cores, from which the run is marked disturbed by the app's own work. Idle it
# uses under 3 % of a core (the README's budget), and a run's lines are redrawn at most twice a second, a few
# percent more; half a core means it drew continuously (a resize storm, a flood of updates) or ran a job of its
# own, and on a box with few cores that is taken from the measurement's threads.
UI_BUSY_CORES = 0.5
# This process's CPU over a run is judged (busy_mark) only over at least this long: over a shorter run one redraw
# of its lines (tens of milliseconds) would read as a busy process.
BUSY_MIN_WALL_S = 2.0


@dataclass
class LiveRun:
    """One timing run as the UI saw it: samples as they streamed in, then the engine's TimingResult."""

    run_id: int
    model: str
    device: str
    flags: Any  # engine.measurements.flags.Flags
    flags_text: str
    status: str = "starting"  # starting, first, warmup, timed, done, cancelled, failed
    index: int = 0
    total: int = 0
    first_iter_ms: float | None = None
    warmup_ms: list[float] = field(default_factory=list)
    samples_ms: list[float] = field(default_factory=list)
    first_seen: list[bool] = field(default_factory=list)  # per timed sample: it met a new input shape
    input_text: str = ""  # "1x3x224x224 float32": what was measured, as the run line says it
    shapes: str = "fixed"  # the input-shape schedule
    compile: str | None = None  # the torch.compile mode, None for eager
    step: str = "infer"  # what an iteration did: "infer", "train (sgd)", with " · amp bf16" under mixed precision
    arm: str | None = None  # "A" or "B" when the run is an arm of an interleaved comparison
    verdict: Any = None  # an arm's comparison verdict (engine.measurements.abtest.Verdict), on both arms
    batches: int = 0  # SamplesArrived messages received (the measurement process batches ~every 100 ms)
    stats: Any = None  # core.stats.TimingStats, recomputed in the UI as samples arrive
    stats_at: float = 0.0  # monotonic time of that last recomputation
    histogram_at: float = 0.0  # monotonic time the live histogram was last drawn (run_lines.histogram_due)
    batch: int = 1  # items per iteration, for items/s
    result: Any = None  # engine.measurements.timing.TimingResult
    error: str | None = None
    # The run as this process saw it: its start (monotonic s, the first sample's arrival) and this process's CPU
    # time then; at its end, every reason its numbers may not be the model's alone (the app's, then the host's).
    seen_from: float | None = None
    ui_cpu_from: float | None = None
    disturbed: list[str] = field(default_factory=list)

    @classmethod
    def of(cls, session, selection, default_shape, flags=None, arm: str | None = None) -> "LiveRun":
        """A new run of the user's `selection` (measure/selection.py) under `flags` (None: the selection's), with
        the session's next id; `default_shape`: the catalogue's input shape when the selection gives none."""
        flags = selection.flags if flags is None else flags
        return cls(run_id=session.new_run_id(), model=selection.model, step=selection.step_text(),
                   device=session.resolved_device(), flags=flags, flags_text=session.flags_text(flags),
                   arm=arm, shapes=selection.shapes,
                   compile=run_option("compile").run_value(selection.compile),
                   input_text=input_text(selection.input_text(default_shape), selection.dtype, selection.quant,
                                         selection.attn))

    @property
    def label(self) -> str:
        return f"#{self.run_id}" + (f" {self.arm}" if self.arm else "")

    def split_by_shape(self) -> tuple[list[float], list[float]]:
        """(repeats, first-seen): the timed samples whose input shape had been met before, and the rest."""
        if not any(self.first_seen):
            return list(self.samples_ms), []
        pairs = list(zip(self.samples_ms, self.first_seen))
        return [ms for ms, new in pairs if not new], [ms for ms, new in pairs if new]

    @property
    def finished(self) -> bool:
        return self.status in ("done", "cancelled", "failed")

    @property
    def complete(self) -> bool:
        return self.status == "done" and bool(self.samples_ms)


def input_text(shape: str, dtype: str, quant: str | None, attn: str | None = None) -> str:
    """What a run fed its model and how the model computes it, as its lines and Compare's like-for-like check say it:
    '1x32 float32 quant int8wo', '1x128 float32 attn eager'."""
    return f"{shape} {dtype}" + (f" quant {quant}" if quant else "") + (f" attn {attn}" if attn else "")


class Disturbances:
    """What this process did that can slow a timed run on the same machine, with when (monotonic seconds): a
    resize of the window (every line is laid out and drawn again). Bounded: the oldest events go first.

    Jobs sent to the measurement process are not among them: it runs one job after another, so none runs beside a
    timed run (a model chosen during a run is analysed after it). This process's own work (heavy redraws, its
    threads) is measured instead, as its CPU time over the run (`busy_mark`)."""

    LIMIT = 256

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._events: deque[tuple[float, str]] = deque(maxlen=self.LIMIT)
        self._size: Any = None

    def note(self, what: str) -> None:
        """`what` happened now: 'window resized' (said 'window resized during the run' against a run)."""
        self._events.append((self._clock(), what))

    def resized(self, size: Any) -> None:
        """The terminal's size now: a change from the last one known is a resize (not the first, nor the same)."""
        if self._size is not None and size != self._size:
            self.note("window resized")
        self._size = size

    def between(self, start: float, end: float) -> list[str]:
        """What happened from `start` to `end`, one line per kind, in order: 'window resized 3 times during the
        run'."""
        counts: dict[str, int] = {}
        for t, what in self._events:
            if start <= t <= end:
                counts[what] = counts.get(what, 0) + 1
        return [f"{what}{'' if n == 1 else f' {n} times'} during the run" for what, n in counts.items()]

    def now(self) -> float:
        return self._clock()


def busy_mark(cpu_s: float, wall_s: float, core_to_spare: bool = False) -> str | None:
    """A mark when this process used UI_BUSY_CORES or more over a run ('the app was busy during the run: its
    process used 0.62 of a core (redraws, its own jobs)'), else None; none either where the run's host figures say a
    core stayed idle beside it (`core_to_spare`, engine/hardware/host_noise.py: this process is one of the others
    there, and had a core of its own)."""
    if wall_s <= 0 or core_to_spare:
        return None
    cores = cpu_s / wall_s
    if cores < UI_BUSY_CORES:
        return None
    return f"the app was busy during the run: its process used {cores:.2f} of a core (redraws, its own jobs)"


def app_marks(disturbances: "Disturbances", seen_from: float, cpu_from: tuple[float, float],
              result: Any = None) -> list[str]:
    """What this process did beside a run that it saw from `seen_from` (monotonic s) to now: the disturbances then
    (a resize), and a busy mark when its CPU since `cpu_from` (monotonic s, process CPU s then) says so and the
    run's host figures (`result`'s host_noise, where it has them) do not say a core was left to spare."""
    now = disturbances.now()
    wall = now - cpu_from[0]
    spare = bool(getattr(getattr(result, "host_noise", None), "core_to_spare", False))
    busy = busy_mark(time.process_time() - cpu_from[1], wall, spare) if wall >= BUSY_MIN_WALL_S else None
    return [*disturbances.between(seen_from, now), *([busy] if busy else [])]


class SessionRuns:
    """The last MAX_RUNS runs (bounded, so memory never grows) and which one is the baseline.

    A run cancelled before any timed sample takes no slot (it is dropped when the next run comes), and the
    baseline is never pushed out: when the slots are full the oldest other run goes, finished before
    unfinished."""

    def __init__(self, capacity: int = MAX_RUNS) -> None:
        self._runs: deque[LiveRun] = deque()
        self.capacity = max(1, capacity)
        self.baseline_id: int | None = None

    def add(self, record: LiveRun) -> None:
        for empty in [r for r in self._runs if r.status == "cancelled" and not r.samples_ms]:
            self._runs.remove(empty)
        if len(self._runs) >= self.capacity:
            base = self.baseline()
            others = [r for r in self._runs if r is not base]
            gone = next((r for r in others if r.finished), others[0] if others else None)
            if gone is not None:
                self._runs.remove(gone)
        self._runs.append(record)

    def get(self, run_id: int) -> LiveRun | None:
        return next((r for r in self._runs if r.run_id == run_id), None)

    def __iter__(self):
        return iter(list(self._runs))

    def __len__(self) -> int:
        return len(self._runs)

    def completed(self) -> list[LiveRun]:
        return [r for r in self._runs if r.complete]

    def baseline(self) -> LiveRun | None:
        """The chosen baseline if it is still kept and complete, else the oldest complete run measured like for
        like with the newest (a run of another model first would leave every speed-up 'n/a: model')."""
        chosen = self.get(self.baseline_id) if self.baseline_id is not None else None
        if chosen is not None and chosen.complete:
            return chosen
        done = self.completed()
        return next((run for run in done if not differences(done[-1], run)), None) if done else None

    def clear(self) -> None:
        self._runs.clear()
        self.baseline_id = None


def save_run(node, result, fingerprint: dict | None) -> None:
    """Append a finished run (or both arms of an A/B) to the history at once, from a thread of this process
    (the measurement process may die; this one writes whole records), so a killed SSH session loses
    nothing. A history that cannot be written is a warning, never a lost run; `node` then posts
    HistoryChanged."""
    from torchperf_tui.app.messages import HistoryChanged  # textual and rich: not on the app's first frame
    # Local: the engine's records load in a worker thread after the first frame (Session.load_engine).
    from torchperf_tui.measure.follow_up import save_to_history

    app = node.app
    path = app.session.history_path

    def save() -> None:
        saved: list = []
        warning = save_to_history(result, path, fingerprint or {}, saved=saved)  # {}: never take one here (torch)
        if warning:
            app.call_from_thread(app.notify, warning, severity="warning")
        node.post_message(HistoryChanged())
        if getattr(app, "mlflow", None) is not None:  # --mlflow: the same records, to MLflow (app/mlflow_link.py)
            app.mlflow.log_records(app, result, fingerprint, saved)

    node.run_worker(save, thread=True, group="history-append", exit_on_error=False)
