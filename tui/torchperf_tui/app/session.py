"""What the panes share, held by the App: the measurement process's client, the device report and where runs
go, the runs kept for comparing, the latest run's memory trace, and the options the app was started with.

Not a widget and not a source of events: the App creates one, panes read it as `self.app.session`, and it is
touched on the UI thread only (the client's threads post MeasurementEvent messages, which the App hands to
`dispatch`). No torch here.
"""

from __future__ import annotations

import dataclasses
import os
from collections import deque
from typing import Any, Callable

from torchperf_tui.app.runs import Disturbances, SessionRuns
from torchperf_tui.wording.refusals import said_in_app
from torchperf_tui.core.errors import user_message
from torchperf_tui.measure.jobs import measuring_kinds
from torchperf_tui.measure.protocol import NOTE, JobDone, JobFailed, Progress

# The engine modules the UI process uses for their types and pure functions, by the short name `Session.has`
# takes; none imports torch (the measurement process does everything that needs it). The session's warm-up
# imports them off the UI thread (numpy, NVML and psutil would delay the first frame); code uses them by plain
# import statements, which then find them loaded.
ENGINE_MODULES = {
    "inputs": "torchperf_tui.engine.workloads.inputs",
    "flags": "torchperf_tui.engine.measurements.flags",
    "shapes": "torchperf_tui.engine.workloads.shapes",
    "stats": "torchperf_tui.core.stats",
    "timing": "torchperf_tui.engine.measurements.timing",
    "nvml": "torchperf_tui.engine.hardware.nvml",
    "device": "torchperf_tui.engine.hardware.device",
    "telemetry": "torchperf_tui.engine.hardware.telemetry",
    "history_file": "torchperf_tui.engine.records.history_file",
    "history_records": "torchperf_tui.engine.records.history_records",
    "history_compare": "torchperf_tui.engine.records.history_compare",
    "roofline": "torchperf_tui.engine.analysis.roofline",
    "throughput": "torchperf_tui.engine.measurements.throughput",
    "profiling": "torchperf_tui.engine.analysis.profiling",
    "abtest": "torchperf_tui.engine.measurements.abtest",
    "kernels": "torchperf_tui.engine.analysis.kernels",
    "determinism": "torchperf_tui.engine.measurements.determinism",
    "memsnap": "torchperf_tui.engine.measurements.memsnap",
    "model_entry": "torchperf_tui.engine.workloads.model_entry",
    "complexity_result": "torchperf_tui.engine.workloads.complexity_result",
    "advice_result": "torchperf_tui.engine.analysis.advice_result",
    "sweep": "torchperf_tui.engine.measurements.sweep",
    "collectives": "torchperf_tui.engine.measurements.collectives",
}


# From this many logical CPUs a box has cores to spare: the UI's event loop gets one of its own, the measurement
# process the rest. Below it (this 2-core box, a 4-core laptop) taking a core from the measurement would cost it
# more than the UI's redraws do, so nothing is pinned.
SPARE_CPUS_FROM = 5


def core_plan(available: set[int] | frozenset[int]) -> tuple[int, frozenset[int]] | None:
    """(the UI's CPU, the measurement process's CPUs) on a box with cores to spare, else None: the UI takes the
    highest-numbered CPU it may run on (the measurement's threads fill the low ones first), the measurement
    process every other one."""
    if len(available) < SPARE_CPUS_FROM:
        return None
    ui = max(available)
    return ui, frozenset(set(available) - {ui})


def _set_affinity(pid: int, cpus) -> None:
    """The calling thread (pid 0) onto `cpus` (Linux: affinity is per thread)."""
    os.sched_setaffinity(pid, cpus)


class Session:
    def __init__(self, *, device: str = "auto", warmup: int | str = 10, iters: int = 64, profile_iters: int = 5,
                 max_batch: int | None = None, history_path: str | None = None, nvml: Any = None,
                 cuda: Any = None, device_report: Any = None, telemetry: Any = None,
                 measurement: Callable[..., Any] | None = None) -> None:
        """`measurement`: how the measurement process is made, `measurement(on_event=, on_notice=, cpus=)` giving
        a client with start/stop/submit/cancel/pending (None: measure/client.py's MeasurementProcess; tests: a
        fake that answers with recorded results)."""
        self.device = device or "auto"  # "auto", "cpu" or "cuda:N": where runs go
        self.warmup, self.iters, self.profile_iters, self.max_batch = warmup, iters, profile_iters, max_batch
        self.history_path = history_path
        self.nvml_seam, self.cuda_seam = nvml, cuda  # tests: a fake GPU
        self.fixed_report = device_report  # tests and snapshots: a fixed DeviceReport
        self.telemetry_source = telemetry  # tests and snapshots: a frozen telemetry source
        self.report: Any = None
        self.applicability: dict[str, dict[str, tuple]] = {}  # device kind -> flag -> (applies, why not)
        self.engine_loaded = False  # the warm-up (load_engine) is done: `has` answers from then on
        self.missing: dict[str, str] = {}  # engine module -> why it is not usable
        self.runs = SessionRuns()
        self.disturbances = Disturbances()  # what this process did that can slow a run in flight
        self.run_memory: deque = deque(maxlen=2000)  # (time, allocated, reserved) of the latest run
        self.run_memory_kind = ""
        self.measurement_factory = measurement
        self.measure: Any = None
        self._measurement_pid: int | None = None
        try:
            cpus = frozenset(os.sched_getaffinity(0))  # read before any pin: the box's CPUs open to this app
        except (AttributeError, OSError):  # no affinity on this platform: nothing is pinned
            cpus = frozenset()
        self.cores = core_plan(cpus)  # (UI CPU, measurement CPUs), None: nothing pinned
        self.set_affinity: Callable[[int, Any], None] = _set_affinity  # tests: a recorder
        self._ui_pinned = False
        self._owners: dict[int, tuple[Any, str]] = {}
        self._cancelled_by_key: set[int] = set()  # jobs that `c` cancelled (cancel_measuring)
        self._next_run_id = 0

    # -- the measurement process ---------------------------------------------------------------------
    def start(self, post_event: Callable[[Any], None], post_notice: Callable[[str], None]) -> None:
        factory = self.measurement_factory
        if factory is None:
            # the real process, where a test has given no fake: loaded behind the first frame
            from torchperf_tui.measure.client import MeasurementProcess as factory

        # On a box with cores to spare each measurement process puts itself on the measurement's CPUs before it
        # imports torch, whose default thread count follows that mask (not the box's every CPU).
        self.measure = factory(on_event=post_event, on_notice=post_notice,
                               cpus=self.cores[1] if self.cores is not None else None)
        self.measure.start()

    def stop(self) -> None:
        if self.measure is not None:
            self.measure.stop()

    @property
    def measurement_pid(self) -> int | None:
        return self._measurement_pid

    @measurement_pid.setter
    def measurement_pid(self, pid: int | None) -> None:
        """The measurement process is ready (the App sets this on the UI thread): on a box with cores to spare,
        the UI's event loop is then kept off the measurement's CPUs (`keep_apart`)."""
        self._measurement_pid = pid
        if pid is not None:
            self.keep_apart(pid)

    def keep_apart(self, pid: int) -> None:
        """Once, this thread (the UI's event loop, which lays out and draws) onto the UI's CPU. The measurement
        process is not moved here: it put itself on the measurement's CPUs before it imported torch (the client's
        `cpus`, set at each start, restarts included), so a process started from a pinned thread, which would
        inherit the one-CPU mask, leaves it all the same. Only this thread is pinned, not this process."""
        if self.cores is None or self._ui_pinned:
            return
        ui, _ = self.cores
        try:
            self.set_affinity(0, {ui})
        except OSError:
            return
        self._ui_pinned = True

    def submit(self, kind: str, params: dict, what: str, owner, slot: str) -> int:
        """Start a job (measure/client.py: a measuring job replaces any other measuring one); its events go
        to `owner` as JobEvent(slot, event)."""
        job_id = self.measure.submit(kind, params, what)
        self._owners[job_id] = (owner, slot)
        return job_id

    def cancel(self, job_id: int, enforce: bool = True) -> None:
        if self.measure is not None:
            self.measure.cancel(job_id, enforce=enforce)

    def cancel_measuring(self) -> list:
        """Cancel every measuring job, as `c` does, and return them. A pane whose job was still waiting then says it
        was cancelled, not that a newer measurement replaced it (cancelled_by_key)."""
        jobs = self.measuring()
        for job in jobs:
            self._cancelled_by_key.add(job.job_id)
            self.cancel(job.job_id)
        return jobs

    def cancelled_by_key(self, job_id: int) -> bool:
        """Whether `c` cancelled job `job_id` (cancel_measuring), rather than a newer request."""
        return job_id in self._cancelled_by_key

    def measuring(self, kinds=None) -> list:
        """The measuring jobs pending in the measurement process (all of them, or of `kinds`)."""
        if self.measure is None:
            return []
        return self.measure.pending(kinds if kinds is not None else measuring_kinds())

    def dispatch(self, event) -> None:
        """A job's event to the pane that started it (a final one forgets the job); a refusal that says what to
        change names the app's fields, not the CLI's options (wording/refusals.py). A job's notes (Progress "note",
        the CLI's lines on stderr) are left out: the panes say what they need of them in their own places."""
        from torchperf_tui.app.messages import JobEvent  # textual and rich: not on the app's first frame
        if isinstance(event, Progress) and event.what == NOTE:
            return
        owner = self._owners.get(event.job_id)
        if isinstance(event, (JobDone, JobFailed)):
            self._owners.pop(event.job_id, None)
        if isinstance(event, JobFailed) and event.remedies:
            event = dataclasses.replace(event, error=said_in_app(event.error, event.refusal, event.remedies))
        if owner is not None and owner[0].is_attached:
            owner[0].post_message(JobEvent(owner[1], event))

    def new_run_id(self) -> int:
        self._next_run_id += 1
        return self._next_run_id

    # -- the engine's torch-free modules, warmed up in a thread -------------------------------------------
    def load_engine(self) -> None:
        """Import the UI's engine modules (numpy for the plots, NVML and psutil for telemetry) once, off the UI
        thread, so the first frame never waits for them; a module that fails to import is kept in `missing`
        with the reason."""
        import importlib

        for name, module in {**ENGINE_MODULES, "textual_plot": "textual_plot"}.items():
            try:
                importlib.import_module(module)
            except Exception as exc:  # a module that is missing or broken disables its pane, not the app
                self.missing[name] = user_message(exc)
        self.engine_loaded = True

    def has(self, module: str) -> bool:
        """The engine module `module` (a key of ENGINE_MODULES) is loaded and usable."""
        return self.engine_loaded and module in ENGINE_MODULES and module not in self.missing

    def nvml_handle(self):
        """The NVML seam: an Nvml instance, or a (fake) pynvml module to open one with, or None (the default)."""
        seam = self.nvml_seam
        if seam is None or not self.has("nvml"):
            return seam
        from torchperf_tui.engine.hardware.nvml import Nvml  # loaded by now: has("nvml") says the engine is in

        if not isinstance(seam, Nvml):
            self.nvml_seam = seam = Nvml.open(module=seam)
        return seam

    # -- the device ------------------------------------------------------------------------------------
    def device_kind(self) -> str:
        """'cuda' or 'cpu': where runs go, for flag applicability and the memory view."""
        if self.device.startswith("cuda"):
            return "cuda"
        if self.device == "cpu":
            return "cpu"
        return "cuda" if (self.report is not None and self.report.cuda_available) else "cpu"

    def default_threads(self) -> int | None:
        """The measurement process's own thread count (from its device report); None before it has said."""
        count = getattr(getattr(self.report, "cpu", None), "torch_threads", None)
        return count if isinstance(count, int) and not isinstance(count, bool) else None

    def flags_text(self, flags, beside=None) -> str:
        """`flags` in words where runs go, a default thread count said as a run's result says it (`beside`: the
        other arm's flags, as Flags.describe takes them)."""
        return flags.describe(self.device_kind(), default_threads=self.default_threads(), beside=beside)

    def resolved_device(self) -> str:
        if self.device != "auto":
            return self.device
        return "cuda:0" if self.report is not None and self.report.cuda_available else "cpu"

    def gpu_index(self) -> int | None:
        if self.report is None or not self.report.gpus or self.device == "cpu":
            return None
        if self.device.startswith("cuda:"):
            return int(self.device.split(":")[1])
        return self.report.gpus[0].index

    def flag_applies(self, name: str, device_kind: str) -> tuple[bool, str | None]:
        """Whether a flag changes anything on the device, as the measurement process's torch answered."""
        table = self.applicability.get("cuda" if device_kind.startswith("cuda") else "cpu", {})
        return table.get(name, (False, "not known yet: the measurement process is starting"))
