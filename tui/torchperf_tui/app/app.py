"""TorchperfApp: the Textual front end of torchperf-tui.

This process never imports torch. Every torch job (analysis, timing, A/B, kernels, throughput, profile,
checks, memory release) runs in the measurement process (worker/, started through jobs/measurement.py after
the first frame), so the screen cannot disturb what it measures and a model that crashes cannot take the app
down. Its events come back as MeasurementEvent messages and go to the handler of the job they belong to. The
UI's own engine modules (types, statistics, NVML and psutil telemetry, the history file) load in a thread
after the first frame.
"""

from __future__ import annotations

import importlib
import os
import threading
import time
from collections import deque
from types import SimpleNamespace
from typing import Any, Iterable

from textual import events, on, work
from textual.app import App, SystemCommand
from textual.binding import Binding
from textual.css.query import NoMatches
from textual.screen import Screen
from textual.widgets import DataTable, TabbedContent
from textual.worker import get_current_worker

from torchperf_tui import options
from torchperf_tui.formatting import format_ms
from torchperf_tui.engine.errors import TorchperfError, user_message
from torchperf_tui.app.messages import (
    AnalysisFailed,
    BatchTried,
    CatalogueLoaded,
    DeviceChosen,
    DeviceProbed,
    EngineLoaded,
    EngineProblem,
    FlagChanged,
    HistoryChanged,
    InputSettingsChanged,
    MemoryReleased,
    ModelAnalysed,
    ModelChosen,
    ModelFailed,
    ProfileFinished,
    RooflineReady,
    RunOptionChanged,
    MeasurementEvent,
    MeasurementNotice,
    RunFailed,
    RunFinished,
    SamplesArrived,
    TelemetryTick,
    ThroughputFinished,
)
from torchperf_tui.app.checks import CheckActions
from torchperf_tui.app.guards import while_running
from torchperf_tui.worker.protocol import MEASURING_KINDS, JobDone, JobFailed, Progress, Ready, Samples
from torchperf_tui.app.comparison import ComparisonActions
from torchperf_tui.app.runs import RunHistory, RunRecord
from torchperf_tui.app.screens.main import TABS, MainScreen
from torchperf_tui.app.widgets.compare.compare_pane import ComparePane
from torchperf_tui.app.widgets.device.device_pane import DevicePane, short_name
from torchperf_tui.app.widgets.flags.flags_pane import FlagsPane
from torchperf_tui.app.widgets.flags.run_options import DEFAULTS as RUN_OPTION_DEFAULTS, RunOptionsPane
from torchperf_tui.app.widgets.history.history_pane import HistoryPane, comparison_text
from torchperf_tui.app.widgets.kernels.kernels_pane import KernelsPane
from torchperf_tui.app.widgets.layers.layers_pane import LayersPane, complexity_summary
from torchperf_tui.app.widgets.memory.memory_pane import MemoryPane
from torchperf_tui.app.widgets.picker.model_picker import ModelPicker
from torchperf_tui.app.widgets.profile.profile_pane import ProfilePane
from torchperf_tui.app.widgets.throughput.throughput_pane import ThroughputPane
from torchperf_tui.app.widgets.timing.histogram import theme_palette
from torchperf_tui.app.widgets.timing.timing_pane import TimingPane, roofline_notes, roofline_text

# The engine modules the UI process uses for their types and pure functions; none imports torch (the
# measurement process does everything that needs it).
ENGINE_MODULES = ("inputs", "flags", "shapes", "timing", "nvml", "device", "telemetry", "results", "roofline",
                  "throughput", "profiling", "abtest", "kernels", "determinism", "memsnap", "model_entry",
                  "complexity_result")
PROFILE_ITERS = 5  # a profile needs only a few iterations; the trace of many is slow to open
LIVE_STATS_EVERY_S = 0.5  # live statistics over all samples so far are recomputed at most this often




def input_text(cfg, complexity=None) -> str:
    """'1x3x224x224' for lines that say what a job was doing: the typed shape, else the model's default as
    its analysis found it, else words."""
    shape = cfg.input_shape
    if shape is None and complexity is not None:
        shape = tuple(complexity.input_shape)
    if shape is not None:
        return "x".join(str(d) for d in (cfg.batch or shape[0], *shape[1:]))
    return f"its default input, batch {cfg.batch or 1}"


class TorchperfApp(ComparisonActions, CheckActions, App):
    """How fast a PyTorch model runs on this box, and why."""

    CSS_PATH = "app.tcss"
    TITLE = "torchperf"
    ENABLE_COMMAND_PALETTE = True

    BINDINGS = [
        Binding("r", "run", "Run"),
        Binding("c", "cancel_run", "Cancel"),
        Binding("slash", "focus_filter", "Model"),
        Binding("f", "focus_flags", "Flags", show=False),
        Binding("e", "release_memory", "Free mem"),
        Binding("s", "screenshot", "Shot"),
        Binding("question_mark", "help", "Help"),
        Binding("q", "quit", "Quit"),
        Binding("b", "set_baseline", "Baseline", show=False),
        Binding("x", "clear_runs", "Clear runs", show=False),
        Binding("t", "find_max_batch", "Max batch", show=False),
        Binding("p", "profile", "Profile", show=False),
        Binding("o", "cycle_profile_sort", "Sort ops", show=False),
        Binding("m", "mark_history_run", "Mark run", show=False),
        Binding("a", "compare_ab", "A/B", show=False),
        Binding("k", "kernels", "Kernels", show=False),
        Binding("d", "check_determinism", "Determinism", show=False),
        Binding("n", "memory_snapshot", "Mem snapshot", show=False),
        Binding("escape", "leave_field", "Leave field", show=False),
        *[Binding(str(i + 1), f"show_tab('{name}')", name.title(), show=False) for i, name in enumerate(TABS)],
    ]

    def __init__(self, model: str | None = None, autostart: bool = False, interval: float = 0.5,
                 device: str = "auto", *, nvml: Any = None, cuda: Any = None, telemetry: Any = None,
                 device_report: Any = None, warmup: int | str = 10, iters: int = 50,
                 screenshot_dir: str | None = None, poll_telemetry: bool = True,
                 history_path: str | None = None, max_batch: int | None = None,
                 profile_iters: int = PROFILE_ITERS, demo: bool = False, demo_pace: float = 3.0) -> None:
        """`nvml`, `cuda`: seams for fake NVML / CUDA backends; `telemetry`: an object with .sample() and
        .history (a frozen source for snapshots); `device_report`: a fixed DeviceReport;
        `poll_telemetry=False` samples once instead of every `interval` seconds; `history_path`: the run
        history file (None: $TORCHPERF_HISTORY, else the user data directory); `max_batch`: the bound of
        the throughput search (None: the engine's default); `profile_iters`: iterations the profiler records;
        `demo`: play the hands-free demo (app/demo.py) on `model`, `demo_pace` seconds per banner."""
        super().__init__()
        self.initial_model = model
        self.autostart = autostart
        self.interval = options.interval(interval)  # nan or 1e-9 would flood the event loop: refused here too
        self.device = device or "auto"
        self._nvml_seam = nvml
        self._cuda_seam = cuda
        self._sampler = telemetry
        self._sampler_injected = telemetry is not None
        self._fixed_report = device_report
        self.warmup = warmup
        self.iters = iters
        self.screenshot_dir = screenshot_dir
        self.poll_telemetry = poll_telemetry
        self.history_path = history_path
        self.max_batch = max_batch
        self.profile_iters = profile_iters
        self._throughput_seq = 0
        self._profile_seq = 0
        self._throughput_job: int | None = None
        self._check_jobs: dict[str, int] = {}
        self._profile_job: int | None = None
        self._history_stale = True
        self.engine: SimpleNamespace | None = None
        self.missing: dict[str, str] = {}
        self.report: Any = None
        self.flags: Any = None
        self.spec: str | None = None
        self.complexity: Any = None
        self.history = RunHistory()
        self.current_run_id: int | None = None
        self._run_seq = 0
        self._telemetry_wake = threading.Event()
        self._probe_failed = False
        self.measure: Any = None  # the measurement process's client (jobs/measurement.py), from mount on
        self.measurement_pid: int | None = None
        self._job_handlers: dict[int, Any] = {}
        self.applicability: dict[str, dict[str, tuple]] = {}  # device kind -> flag -> (applies, why not)
        self._analysis_job: int | None = None
        self._run_job: int | None = None  # the timing run or A/B comparison in flight
        self._memory_job: int | None = None
        self.allocator_reading: dict | None = None  # the measurement process's allocator and RSS, when idle
        self.measurement_gpu_bytes: Any = None  # NVML's used memory for the measurement process's pid
        self._ui_ready = threading.Event()
        self.main: MainScreen | None = None
        self.last_telemetry: Any = None
        self.last_release: Any = None
        self.run_options = dict(RUN_OPTION_DEFAULTS)
        # Memory between iterations of the latest run (allocator on CUDA, RSS on CPU), and releases, for
        # the Memory chart; bounded like every history in the app.
        self.run_memory: deque = deque(maxlen=2000)
        self.run_memory_kind = ""
        self.releases: deque = deque(maxlen=16)
        self.demo = None
        if demo:
            from torchperf_tui.app.demo import DemoDirector

            self.demo = DemoDirector(self, pace=demo_pace)

    def get_default_screen(self) -> Screen:
        self.main = MainScreen(id="main")
        return self.main

    # -- start-up: paint first, then load the engine in a thread -------------------------
    def on_load(self) -> None:
        # SIGTERM / SIGHUP (a dropped SSH session) exit as `q` does, giving the terminal back.
        from torchperf_tui.app.signals import exit_on_signals

        exit_on_signals(self)

    def on_mount(self) -> None:
        self.sub_title = "loading engine…"
        self._check_ui_ready()
        # Importing torch holds the GIL for seconds: start it only once the first frame is out.
        self.call_after_refresh(self.call_after_refresh, self._start_workers)
        if self.poll_telemetry:
            self.set_interval(self.interval, self.request_telemetry)

    def _start_workers(self) -> None:
        self._start_measurement()
        self.load_engine()
        self.telemetry_loop()

    # -- the measurement process: every torch job runs there ------------------------------
    def _start_measurement(self) -> None:
        from torchperf_tui.jobs.measurement import MeasurementProcess

        self.measure = MeasurementProcess(on_event=lambda event: self.post_message(MeasurementEvent(event)),
                                          on_notice=lambda text: self.post_message(MeasurementNotice(text)))
        self.measure.start()
        if self._nvml_seam is not None or self._cuda_seam is not None:
            self.probe_with_seams()  # tests: a fake GPU, probed here through the injected seams
        else:
            self.submit("probe", {}, "probing the device", self._probe_answered)
        self.submit("catalogue", {}, "listing the models", self._catalogue_answered)

    def submit(self, kind: str, params: dict, what: str, handler) -> int:
        """Send a job to the measurement process; its events go to `handler` on the UI thread."""
        job_id = self.measure.submit(kind, params, what)
        self._job_handlers[job_id] = handler
        return job_id

    def cancel_job(self, job_id: int | None, enforce: bool = True) -> None:
        """Cancel a job; `enforce=False` for one that ends by itself soon (its answer is simply dropped)."""
        if job_id is not None and self.measure is not None:
            self.measure.cancel(job_id, enforce=enforce)

    @on(MeasurementEvent)
    def _measurement_event(self, message: MeasurementEvent) -> None:
        event = message.event
        if isinstance(event, Ready):
            self.measurement_pid = event.pid
            self.allocator_reading = None  # a new process: the old one's figures are gone with it
            if self._sampler is not None and not self._sampler_injected:
                self._sampler.follow_process(event.pid)  # RSS where the model lives, on the chart too
            return
        if not isinstance(event, (Samples, Progress, JobDone, JobFailed)):
            return  # Started: nothing to show
        handler = self._job_handlers.get(event.job_id)
        if isinstance(event, (JobDone, JobFailed)):
            self._job_handlers.pop(event.job_id, None)
        if handler is not None and self.is_running:
            handler(event)

    @on(MeasurementNotice)
    def _measurement_notice(self, message: MeasurementNotice) -> None:
        self.notify(message.text, title="measurement process", severity="error", timeout=12)

    @work(thread=True, group="engine", exit_on_error=False)
    def probe_with_seams(self) -> None:
        from torchperf_tui.engine.device import probe_device
        from torchperf_tui.engine.flags import applicability_table

        self._ui_ready.wait(timeout=30)
        deadline = time.monotonic() + 30
        while self.engine is None and time.monotonic() < deadline:  # one Nvml opened on the seam, by either
            time.sleep(0.02)
        nvml = self._nvml_handle()
        try:
            report = self._fixed_report or probe_device(nvml=nvml, cuda=self._cuda_seam)
            self.applicability = applicability_table()
        except Exception as exc:
            self.post_message(EngineProblem("device", user_message(exc)))
            return
        self.post_message(DeviceProbed(report))

    def _probe_answered(self, event) -> None:
        if isinstance(event, JobFailed):
            self.post_message(EngineProblem("device", event.error))
            return
        self.applicability = event.extra.get("applicability", {})
        self.post_message(DeviceProbed(self._fixed_report if self._fixed_report is not None else event.result))

    def _catalogue_answered(self, event) -> None:
        if isinstance(event, JobFailed):
            self.post_message(EngineProblem("models", event.error))
            return
        self.post_message(CatalogueLoaded(event.result))

    def _check_ui_ready(self) -> None:
        """The panes inside the tabs mount a little after the screen; the engine reports wait for them."""
        panes = (TimingPane, ComparePane, LayersPane, DevicePane, MemoryPane, ThroughputPane, ProfilePane,
                 HistoryPane, KernelsPane, FlagsPane, RunOptionsPane, ModelPicker)
        if (self.main is not None and all(self.main.query(pane) for pane in panes)
                and all(select.query("SelectCurrent") for select in self.main.query("Select"))):
            self._ui_ready.set()
        else:
            self.set_timer(0.02, self._check_ui_ready)

    @work(thread=True, group="engine", exit_on_error=False)
    def load_engine(self) -> None:
        """The UI's own modules (no torch: numpy for the plots, NVML and psutil for telemetry), off the UI
        thread so the first frame never waits for them."""
        missing: dict[str, str] = {}
        modules: dict[str, Any] = {}
        for name in ENGINE_MODULES:
            try:
                modules[name] = importlib.import_module(f"torchperf_tui.engine.{name}")
            except Exception as exc:  # a module that is missing or broken disables its pane, not the app
                missing[name] = user_message(exc)
        try:
            importlib.import_module("textual_plot")
        except Exception as exc:
            missing["textual_plot"] = user_message(exc)
        self.engine = SimpleNamespace(**modules)
        # With the modules already imported (a second app in one process) this can beat the panes' mount.
        self._ui_ready.wait(timeout=30)
        self.post_message(EngineLoaded(missing))

        nvml = self._nvml_handle()
        if self._sampler is None and "telemetry" in modules:
            try:
                # The caching allocator lives in the measurement process: its readings come from there.
                cuda = self._cuda_seam if self._cuda_seam is not None else modules["telemetry"].ALLOCATOR_ELSEWHERE
                self._sampler = modules["telemetry"].TelemetrySampler(nvml=nvml, cuda=cuda)
                if self.measurement_pid is not None:  # it said Ready before the sampler existed
                    self._sampler.follow_process(self.measurement_pid)
            except Exception as exc:
                self.post_message(EngineProblem("telemetry", user_message(exc)))
        if not self.poll_telemetry:
            self.call_from_thread(self.request_telemetry)

    def _nvml_handle(self):
        """The NVML seam: an Nvml instance, or a (fake) pynvml module to open one with, or the default."""
        seam = self._nvml_seam
        if seam is None or self.engine is None or not hasattr(self.engine, "nvml"):
            return seam
        if not isinstance(seam, self.engine.nvml.Nvml):
            self._nvml_seam = seam = self.engine.nvml.Nvml.open(module=seam)
        return seam

    @while_running
    def on_engine_loaded(self, message: EngineLoaded) -> None:
        self.missing = dict(message.missing)
        main = self.main
        if "textual_plot" not in self.missing:
            from torchperf_tui.app.widgets.timing.histogram import _PlotHolder

            for holder in main.query(_PlotHolder):
                holder.attach_plot()
        if self.engine is not None and hasattr(self.engine, "flags"):
            self.flags = self.engine.flags.Flags()
        for name, why in self.missing.items():
            self.notify(f"engine module {name} not available: {why}", severity="warning", timeout=8)
        self._build_flags()
        if self._active_tab() == "history":
            self.refresh_history()

    def device_kind(self) -> str:
        """'cuda' or 'cpu': where runs go, for flag applicability and the memory view."""
        if self.device.startswith("cuda"):
            return "cuda"
        if self.device == "cpu":
            return "cpu"
        return "cuda" if (self.report is not None and self.report.cuda_available) else "cpu"

    def gpu_index(self) -> int | None:
        if self.report is None or not self.report.gpus or self.device == "cpu":
            return None
        if self.device.startswith("cuda:"):
            return int(self.device.split(":")[1])
        return self.report.gpus[0].index

    def _applicability(self, name: str, device_kind: str):
        """Whether a flag changes anything on the device, as the measurement process's torch answered."""
        table = self.applicability.get("cuda" if device_kind.startswith("cuda") else "cpu", {})
        return table.get(name, (False, "not known yet: the measurement process is starting"))

    def _build_flags(self) -> None:
        if self.engine is None or not hasattr(self.engine, "flags") or self.flags is None:
            return  # the engine's modules are not in yet (the device report can arrive first)
        if (self.report is None or not self.applicability) and not self._probe_failed:
            return  # wait for the device report, so the switches come up with the right applicability
        pane = self.main.query_one(FlagsPane)
        if pane.query("FlagRow"):
            pane.update_applicability(self.device_kind(), self._applicability)
            return
        pane.build(self.engine.flags.FLAG_SPECS, self.flags, self.device_kind(), self._applicability)

    @while_running
    def on_device_probed(self, message: DeviceProbed) -> None:
        self.report = message.report
        self.main.query_one(DevicePane).show_report(self.report, self._resolved_device())
        self.sub_title = short_name(self.report, self._resolved_device())
        self._build_flags()

    def _resolved_device(self) -> str:
        if self.device != "auto":
            return self.device
        return "cuda:0" if self.report is not None and self.report.cuda_available else "cpu"

    @while_running
    def on_catalogue_loaded(self, message: CatalogueLoaded) -> None:
        self.main.query_one(ModelPicker).set_catalogue(message.entries)
        timing = self.main.query_one(TimingPane)
        if self.spec is None:
            timing.show_model("pick a model: / to filter, ⏎ to choose")
        if self.initial_model and self.spec is None:
            self.choose_model(self.initial_model)
            if self.demo is not None:
                self.demo.start()
            elif self.autostart:
                self.action_run()

    @while_running
    def on_engine_problem(self, message: EngineProblem) -> None:
        self.notify(f"{message.where}: {message.error}", severity="error", timeout=8)
        if message.where == "device":
            self._probe_failed = True
            self.main.query_one(DevicePane).show_error(message.error)
            self._build_flags()
        elif message.where in ("telemetry", "release"):
            self.main.query_one(MemoryPane).show_error(message.error)
        elif message.where == "history":
            self.main.query_one(HistoryPane).show_error(message.error)
        elif message.where == "models":
            self.main.query_one(TimingPane).show_model(f"model catalogue not available: {message.error}")

    # -- model choice and analysis --------------------------------------------------------
    @on(ModelChosen)
    def _model_chosen(self, message: ModelChosen) -> None:
        self.choose_model(message.spec)

    def choose_model(self, spec: str) -> None:
        if self.engine is None or not hasattr(self.engine, "inputs"):
            self.notify("the model registry is still loading", severity="warning")
            return
        picker = self.main.query_one(ModelPicker)
        if spec != self.spec:
            picker.set_default_shape(())  # a new model starts from its own default input
        self.spec = spec
        self.complexity = None
        self.main.query_one(TimingPane).show_model(f"[b]{spec}[/] · analysing…")
        self.analyse_model(spec, picker.settings())

    @on(InputSettingsChanged)
    def _settings_changed(self, message: InputSettingsChanged) -> None:
        if self.spec is not None:
            self.choose_model(self.spec)

    def _full_shape(self, settings: dict, default: tuple | None) -> tuple | None:
        """(batch, *dims) from the typed fields; None when no shape is typed and there is no default."""
        inputs = self.engine.inputs
        batch = inputs.parse_shape(f"{settings['batch']}x1")[0]
        if settings["shape"]:
            return inputs.parse_shape(f"{batch}x{settings['shape']}")
        if default is None:
            return None
        return (batch, *default)

    def analyse_model(self, spec: str, settings: dict) -> None:
        """FLOPs, parameters and the layer table on the meta device, in the measurement process (it imports
        the user's module); a newer request replaces one still waiting."""
        try:
            typed = self._full_shape(settings, ())
        except Exception as exc:
            self.post_message(ModelFailed(spec, user_message(exc)))
            return
        batch = typed[0]
        dims = tuple(typed[1:]) or None
        self.cancel_job(self._analysis_job, enforce=False)  # meta-device analysis: it ends by itself

        def answered(event) -> None:
            if event.job_id != self._analysis_job:
                return  # replaced by a newer request (another model, another shape)
            if isinstance(event, JobFailed):
                self.post_message(ModelFailed(spec, event.error))
            else:
                self.post_message(ModelAnalysed(spec, event.extra["entry"], event.result))

        self._analysis_job = self.submit("analyse", {"spec": spec, "batch": batch, "dims": dims,
                                                     "dtype": settings["dtype"]}, f"analysing {spec}", answered)

    @while_running
    def on_model_analysed(self, message: ModelAnalysed) -> None:
        if message.spec != self.spec:
            return
        self.complexity = message.complexity
        self.main.query_one(ModelPicker).set_default_shape(tuple(message.complexity.input_shape)[1:])
        self.main.query_one(TimingPane).show_model(
            f"[b]{message.spec}[/] · {complexity_summary(message.complexity)}")
        self.main.query_one(LayersPane).show_complexity(message.spec, message.complexity)

    @while_running
    def on_model_failed(self, message: ModelFailed) -> None:
        if message.spec != self.spec:
            return
        self.notify(message.error, title=message.spec, severity="error", timeout=8)
        if self.demo is not None:
            self.demo.stop(f"demo stopped: {message.spec}: {message.error}")
        self.main.query_one(TimingPane).show_model(f"[b]{message.spec}[/] · [b $error]error:[/] {message.error}")
        self.main.query_one(LayersPane).show_error(message.spec, message.error)

    # -- timing runs ----------------------------------------------------------------------
    def action_run(self) -> None:
        """Start a timing run of the chosen model under the current flags (cancelling any in flight)."""
        if self.engine is None or not hasattr(self.engine, "timing"):
            self.notify("the timing engine is still loading", severity="warning")
            return
        if self.spec is None:
            self.notify("pick a model first: / to filter, ⏎ to choose", severity="warning")
            return
        self._mark_cancelling()
        self._run_seq += 1
        run_id = self._run_seq
        flags = self.flags
        compile_mode = self.run_options["compile"]
        record = RunRecord(run_id=run_id, model=self.spec, device=self._resolved_device(), flags=flags,
                           flags_text=flags.describe(self.device_kind()), shapes=self.run_options["shapes"],
                           compile=None if compile_mode == "eager" else compile_mode)
        self.history.add(record)
        self.current_run_id = run_id
        self.run_memory.clear()
        timing = self.main.query_one(TimingPane)
        timing.set_planned_iters(self.iters)
        timing.show_run(record)
        self._refresh_compare()
        try:
            cfg = self._bench_config(self.spec, self.main.query_one(ModelPicker).settings(), flags)
        except Exception as exc:
            self.post_message(RunFailed(run_id, user_message(exc)))
            return
        self.cancel_job(self._run_job)  # never two measurements at once: the one in flight stops first
        record.batch = cfg.batch or 1
        self._run_job = self.submit("time", {"cfg": cfg}, f"timing {self.spec} at {input_text(cfg, self.complexity)}",
                                    self._timing_handler(run_id, self.spec, cfg))

    def _mark_cancelling(self) -> None:
        current = self.history.get(self.current_run_id) if self.current_run_id else None
        if current is not None and not current.finished:
            current.status = "cancelling"

    def _bench_config(self, spec: str, settings: dict, flags):
        """The engine's BenchConfig for the chosen model, input settings, device and flags: built on the UI
        thread and frozen, so a job's config cannot change under it."""
        eng = self.engine
        shape = self._full_shape(settings, None)
        batch = shape[0] if shape else eng.inputs.parse_shape(f"{settings['batch']}x1")[0]
        compile_mode = self.run_options["compile"]
        return eng.timing.BenchConfig(model=spec, input_shape=shape, batch=batch, device=self.device,
                                      dtype=settings["dtype"], channels_last=settings["channels_last"],
                                      warmup=self.warmup, iters=self.iters, flags=flags,
                                      shapes=self.run_options["shapes"],
                                      compile=None if compile_mode == "eager" else compile_mode)

    def _timing_handler(self, run_id: int, spec: str, cfg):
        """What a timing job's events do: batches of samples to the run's record, then its result (saved
        to the history and placed on the roofline), or its failure."""
        def handle(event) -> None:
            if isinstance(event, Samples):
                self.post_message(SamplesArrived(run_id, event.phase, event.index, event.total,
                                                 list(event.samples_ms), list(event.first_seen),
                                                 list(event.memory), event.memory_kind))
            elif isinstance(event, JobFailed):
                self.post_message(RunFailed(run_id, event.error, cancelled=event.cancelled))
            elif isinstance(event, JobDone):
                result = event.result
                self.post_message(RunFinished(run_id, result))
                if not result.cancelled:
                    self.save_to_history(result, event.extra.get("fingerprint"))
                    if run_id == self.current_run_id:
                        self._post_roofline(run_id, spec, result)
        return handle

    def _post_roofline(self, run_id: int, spec: str, result) -> None:
        """The run's place on the roofline, as `torchperf-tui roofline` computes it: FLOPs counted at the
        run's own input, peaks from the app's device report (NA on the CPU, with the reason)."""
        def answered(event) -> None:
            if isinstance(event, JobFailed):
                self.post_message(RooflineReady(run_id, error=event.error))
            else:
                self.post_message(RooflineReady(run_id, event.result))

        self.submit("roofline", {"spec": spec, "result": result, "report": self.report},
                    f"placing run {run_id} on the roofline", answered)

    @while_running
    def on_roofline_ready(self, message: RooflineReady) -> None:
        record = self.history.get(message.run_id)
        if record is None or message.run_id != self.current_run_id:
            return
        timing = self.main.query_one(TimingPane)
        if message.error:
            timing.show_roofline(f"run {record.label} roofline: [b $error]n/a:[/] {message.error}")
        else:
            timing.show_roofline(f"run {record.label} {roofline_text(message.result)}",
                                 roofline_notes(message.result))
            if message.result.model == self.spec:
                self.main.query_one(LayersPane).show_roofline(message.result.layers)

    @work(thread=True, group="history-append", exit_on_error=False)
    def save_to_history(self, result, fingerprint: dict | None) -> None:
        """Append a completed run (or both arms of a comparison) to the history file at once, from a thread
        of the UI process (the measurement process may die; this one writes whole records), so a killed SSH
        session loses nothing; a history that cannot be written is a warning, never a lost run."""
        results = self.engine.results
        try:
            results.History(self.history_path).extend(results.records_of(result, fingerprint=fingerprint or {}))
        except results.HistoryNotDurable as exc:  # in the file, not confirmed on disk: say so, and show it
            self.call_from_thread(self.notify, user_message(exc), severity="warning")
        except Exception as exc:
            self.call_from_thread(self.notify, f"run not saved to history: {user_message(exc)}",
                                  severity="warning")
            return
        self.post_message(HistoryChanged())

    @while_running
    def on_samples_arrived(self, message: SamplesArrived) -> None:
        record = self.history.get(message.run_id)
        if record is None or message.run_id != self.current_run_id or record.finished:
            return  # a cancelled run's last samples: dropped, never mixed into the new run
        record.batches += 1
        if message.memory_points:
            self.run_memory.extend(message.memory_points)
            self.run_memory_kind = message.memory_kind
        if not message.phase:
            return  # memory points alone, between iterations of a slow model
        redraw = False
        if message.phase == "first":
            record.first_iter_ms = message.samples_ms[0]
        elif message.phase == "warmup":
            record.warmup_ms.extend(message.samples_ms)
            redraw = self._due(record)
        elif message.phase == "timed":
            record.samples_ms.extend(message.samples_ms)
            record.first_seen.extend(message.first_seen)
            redraw = self._live_stats(record, message.index >= message.total - 1)
        phase_changed = record.status != message.phase
        record.status, record.index, record.total = message.phase, message.index, message.total
        # While the measurement process measures, this process shares the machine's cores with it: the run's
        # lines are redrawn at most as often as its statistics, plus at each change of phase.
        if redraw or phase_changed or message.phase == "first":
            self._show_current(record, redraw)
            if redraw and self.last_telemetry is not None:
                self._show_telemetry(*self.last_telemetry)  # the run's memory trace (telemetry pauses on a CPU)

    @staticmethod
    def _due(record: RunRecord, now_anyway: bool = False) -> bool:
        """True at most every LIVE_STATS_EVERY_S per run (or when `now_anyway`): when its lines are redrawn."""
        now = time.monotonic()
        if not now_anyway and now - record.stats_at < LIVE_STATS_EVERY_S:
            return False
        record.stats_at = now
        return True

    def _live_stats(self, record: RunRecord, last: bool) -> bool:
        """Statistics over every sample so far, computed here (the measurement process only measures), when
        `_due` (and at the last sample): the work grows with the samples, the redraw rate must not. True when
        they were recomputed (the histogram, also over every sample, is redrawn with them)."""
        if not self._due(record, now_anyway=last):
            return False
        record.stats = self.engine.timing.compute_stats(record.samples_ms, batch=record.batch or 1)
        return True

    def _active_tab(self) -> str:
        try:
            return self.main.query_one(TabbedContent).active.removeprefix("tab-")
        except NoMatches:
            return ""

    def _show_current(self, record: RunRecord, redraw: bool = True) -> None:
        """The run on the Timing tab; `redraw=False` updates the progress line only, not the histogram."""
        if not self._active_tab():
            return  # shutting down
        self.main.query_one(TimingPane).show_run(record, histogram=redraw and self._active_tab() == "timing")

    @while_running
    def on_run_finished(self, message: RunFinished) -> None:
        record = self.history.get(message.run_id)
        if record is None:
            return
        result = message.result
        record.result = result
        record.status = "cancelled" if result.cancelled else "done"
        record.samples_ms = list(result.samples_ms)
        record.warmup_ms = list(result.warmup_ms)
        record.first_iter_ms = result.first_iter_ms
        record.stats = result.stats
        if len(result.sample_first_seen) == len(record.samples_ms):
            record.first_seen = list(result.sample_first_seen)
        if message.run_id == self.current_run_id:
            self._show_current(record)
            if record.status == "done" and record.stats is not None:
                self.notify(f"{record.label} {record.model}: median {format_ms(record.stats.p50_ms)}, "
                            f"p99 {format_ms(record.stats.p99_ms)}", title="run finished", timeout=4)
        self._refresh_compare()

    @while_running
    def on_run_failed(self, message: RunFailed) -> None:
        record = self.history.get(message.run_id)
        if record is None:
            return
        if message.cancelled:
            record.status = "cancelled"
        else:
            record.status = "failed"
            record.error = message.error
            self.notify(message.error, title=f"run {record.label} failed", severity="error", timeout=8)
        if message.run_id == self.current_run_id:
            self._show_current(record)
        self._refresh_compare()

    def action_cancel_run(self) -> None:
        """Cancel what measures: timing or A/B, throughput search, profile, kernels, checks (each stops
        between iterations; one stuck in native code is killed with its process after a grace period)."""
        jobs = self.measure.pending(MEASURING_KINDS) if self.measure is not None else []
        for job in jobs:
            self.measure.cancel(job.job_id)
        if jobs:
            self._mark_cancelling()
            self.notify("cancelling the run…", timeout=2)

    def _refresh_compare(self) -> None:
        if self._active_tab() == "compare":
            self.main.query_one(ComparePane).show_runs(self.history, theme_palette(self))

    def action_set_baseline(self) -> None:
        """Make the run highlighted in Compare the baseline for speed-ups."""
        run_id = self.main.query_one(ComparePane).highlighted_run_id()
        if run_id is None:
            return
        self.history.baseline_id = run_id
        self._refresh_compare()
        self.notify(f"baseline is now run #{run_id}", timeout=2)

    def action_clear_runs(self) -> None:
        """Forget the kept runs (a run in flight continues)."""
        current = self.history.get(self.current_run_id) if self.current_run_id else None
        self.history.clear()
        if current is not None and not current.finished:
            self.history.add(current)
        self._refresh_compare()

    # -- throughput: the largest batch that fits ------------------------------------------
    def _measuring(self, what: str) -> bool:
        """True (and says so) while a timing run or comparison is in flight: a second measurement on the
        same machine would disturb it."""
        busy = self.measure is not None and any(j.kind in ("time", "ab") for j in self.measure.pending())
        if busy:
            self.notify(f"a run is in flight: the {what} would share the machine with it (c cancels the run)",
                        severity="warning")
        return busy

    def _ready_for(self, module: str, what: str) -> bool:
        if self.engine is None or not hasattr(self.engine, module):
            why = self.missing.get(module)
            self.notify(f"{what} not available: {why}" if why else f"the {what} engine is still loading",
                        severity="warning")
            return False
        if self.spec is None:
            self.notify("pick a model first: / to filter, ⏎ to choose", severity="warning")
            return False
        return True

    def action_find_max_batch(self) -> None:
        """Search the largest batch that fits for the chosen model and settings (cancels a search in flight)."""
        if not self._ready_for("throughput", "throughput"):
            return
        self._throughput_seq += 1
        self.action_show_tab("throughput")
        self.main.query_one(ThroughputPane).start(
            f"[b]{self.spec}[/] on {self._resolved_device()} · "
            f"{self.flags.describe(self.device_kind()) if self.flags is not None else 'default flags'} · "
            "searching: doubling the batch until samples/s stops improving, it does not fit, or the time "
            "budget runs out…")
        search_id = self._throughput_seq
        try:
            cfg = self._bench_config(self.spec, self.main.query_one(ModelPicker).settings(), self.flags)
        except Exception as exc:
            self.post_message(AnalysisFailed("throughput", search_id, user_message(exc)))
            return
        options = {} if self.max_batch is None else {"max_batch": self.max_batch}

        def handle(event) -> None:
            if isinstance(event, Progress):
                self.post_message(BatchTried(search_id, event.data))
            elif isinstance(event, JobFailed) and event.cancelled:
                self.post_message(AnalysisFailed("throughput", search_id, "cancelled before it started"))
            elif isinstance(event, JobFailed):
                self.post_message(AnalysisFailed("throughput", search_id, event.error))
            elif isinstance(event, JobDone):
                self.post_message(ThroughputFinished(search_id, event.result))

        self.cancel_job(self._throughput_job)
        self._throughput_job = self.submit("throughput", {"cfg": cfg, "options": options},
                                           f"searching the largest batch of {self.spec}", handle)

    @while_running
    def on_batch_tried(self, message: BatchTried) -> None:
        if message.search_id == self._throughput_seq:
            self.main.query_one(ThroughputPane).add_try(message.batch_try)

    @while_running
    def on_throughput_finished(self, message: ThroughputFinished) -> None:
        if message.search_id != self._throughput_seq:
            return
        result = message.result
        pane = self.main.query_one(ThroughputPane)
        pane.show_result(result)
        pane.show_status(f"[b]{result.model}[/] {'x'.join(map(str, result.sample_shape))} per sample, "
                         f"{result.dtype} on {result.device} · {'cancelled' if result.cancelled else 'done'}")
        if not result.cancelled:
            self.notify(f"{result.model}: {result.headline()}", title="throughput", timeout=4)

    @while_running
    def on_analysis_failed(self, message: AnalysisFailed) -> None:
        """A failed search or profile: a notification and the pane's error line; earlier results stay."""
        if message.kind == "compare":
            self.comparison_failed(message.job_id, message.error)
            if message.error == "cancelled":
                return
        elif message.kind == "kernels" and message.job_id == self._kernels_seq:
            self.main.query_one(KernelsPane).show_error(message.error)
        elif message.kind == "determinism" and message.job_id == self._determinism_seq:
            self.main.query_one(TimingPane).show_note(f"determinism: [b $error]error:[/] {message.error}")
        elif message.kind == "memsnap" and message.job_id == self._memsnap_seq:
            pass  # the notification below is all: there is no pane for snapshots
        elif message.kind == "throughput" and message.job_id == self._throughput_seq:
            self.main.query_one(ThroughputPane).show_error(message.error)
        elif message.kind == "profile" and message.job_id == self._profile_seq:
            self.main.query_one(ProfilePane).show_error(message.error)
        else:
            return
        self.notify(message.error, title=f"{message.kind} failed", severity="error", timeout=8)

    # -- profile: torch.profiler's top operators ----------------------------------------------
    def action_profile(self) -> None:
        """Profile a few iterations of the chosen model (cancels a profile in flight)."""
        if not self._ready_for("profiling", "profiler"):
            return
        self._profile_seq += 1
        self.action_show_tab("profile")
        pane = self.main.query_one(ProfilePane)
        pane.show_status(f"[b]{self.spec}[/] on {self._resolved_device()} · profiling {self.profile_iters} "
                         "iterations…")
        profile_id = self._profile_seq
        try:
            cfg = self._bench_config(self.spec, self.main.query_one(ModelPicker).settings(), self.flags)
        except Exception as exc:
            self.post_message(AnalysisFailed("profile", profile_id, user_message(exc)))
            return

        def handle(event) -> None:
            if isinstance(event, JobFailed) and event.cancelled:
                return  # replaced before it began: the newer request says what happens
            if isinstance(event, JobFailed):
                self.post_message(AnalysisFailed("profile", profile_id, event.error))
            elif isinstance(event, JobDone):
                self.post_message(ProfileFinished(profile_id, event.result))

        self.cancel_job(self._profile_job)
        self._profile_job = self.submit("profile", {"cfg": cfg, "iters": self.profile_iters},
                                        f"profiling {self.spec}", handle)

    @while_running
    def on_profile_finished(self, message: ProfileFinished) -> None:
        if message.profile_id != self._profile_seq:
            return
        result = message.result
        self.main.query_one(ProfilePane).show_result(result, self.engine.profiling.sort_ops)
        if result.trace_path:
            self.notify(f"Chrome trace saved to {result.trace_path}", title="profile", timeout=8)

    def action_cycle_profile_sort(self) -> None:
        """Sort the profile's operators by the next key of the engine's SORT_KEYS."""
        pane = self.main.query_one(ProfilePane)
        if pane.result is None or self.engine is None or not hasattr(self.engine, "profiling"):
            return
        keys = list(self.engine.profiling.SORT_KEYS)
        current = pane.sort_key if pane.sort_key in keys else keys[-1]
        pane.sort_by(keys[(keys.index(current) + 1) % len(keys)])

    # -- history: past runs from the history file ---------------------------------------------
    def refresh_history(self) -> None:
        """Reload the History tab's page now if its tab is shown, else when it next is."""
        self._history_stale = True
        if self._active_tab() == "history" and self.engine is not None and hasattr(self.engine, "results"):
            self._history_stale = False
            self.main.query_one(HistoryPane).show_history(self.history_path)

    @on(HistoryPane.Loaded)
    @while_running
    def _history_page_loaded(self, message: HistoryPane.Loaded) -> None:
        """The pane read a page: its bad lines in one notification (one line however many), the marks compared."""
        if message.loaded.warnings:
            self.notify("\n".join(message.loaded.warnings), title="history: lines skipped", severity="warning",
                        timeout=8)
        self._show_history_comparison()

    @on(HistoryChanged)
    def _history_changed(self, message: HistoryChanged) -> None:
        self.refresh_history()

    def action_mark_history_run(self) -> None:
        """Mark (or unmark) the highlighted history run; with two marked, compare them."""
        if self._active_tab() != "history":
            return
        self.main.query_one(HistoryPane).toggle_mark()
        self._show_history_comparison()

    @on(DataTable.RowSelected, "#history-table")
    def _history_row_selected(self, event: DataTable.RowSelected) -> None:
        self.main.query_one(HistoryPane).toggle_mark(event.row_key.value)
        self._show_history_comparison()

    def _show_history_comparison(self) -> None:
        pane = self.main.query_one(HistoryPane)
        pair = pane.marked_pair()
        if pair is None:
            pane.show_comparison(f"{len(pane.marked)} of 2 runs marked: m or ⏎ on a row marks it")
            return
        try:
            comparison = self.engine.results.compare_records(*pair)
        except Exception as exc:
            pane.show_comparison(f"[b $error]error:[/] {user_message(exc)}")
            return
        pane.show_comparison(comparison_text(comparison))

    # -- flags and device --------------------------------------------------------------
    @on(FlagChanged)
    def _flag_changed(self, message: FlagChanged) -> None:
        if self.flags is None:
            return
        try:
            before, self.flags = self.flags, self.flags.replace(**{message.name: message.value})
        except Exception as exc:
            self.notify(user_message(exc), severity="error")
            return
        self.previous_flags = before
        if self.spec is None or not hasattr(self.engine, "timing"):
            return
        if self.run_options["flip"] == "ab" and hasattr(self.engine, "abtest"):
            self.start_comparison(before, self.flags)  # the old flags against the new, interleaved
        else:
            self.action_run()  # never mix flag sets: the run in flight is cancelled and a new one starts

    @on(RunOptionChanged)
    def _run_option_changed(self, message: RunOptionChanged) -> None:
        if self.run_options.get(message.name) == message.value:
            return  # a select reporting its value as it mounts, or the same value again: nothing changed
        self.run_options[message.name] = message.value
        if message.name in ("shapes", "compile") and self.spec is not None and self.engine is not None \
                and hasattr(self.engine, "timing"):
            self.action_run()

    @on(DeviceChosen)
    def _device_chosen(self, message: DeviceChosen) -> None:
        self.device = message.device
        if self.report is not None:
            self.sub_title = short_name(self.report, self._resolved_device())
        self._build_flags()
        if self.last_telemetry is not None:
            self._show_telemetry(self.last_telemetry[0], self.last_telemetry[1])

    # -- telemetry -----------------------------------------------------------------------
    def request_telemetry(self) -> None:
        """Called by set_interval: wake the sampling thread (a tick is skipped while it is busy). Skipped
        while a run measures on the CPU: there the model's threads fill the cores this process would wake on,
        and the run's own memory trace (RSS per iteration) is what the Memory chart shows meanwhile."""
        if self.device_kind() == "cpu" and self.measure is not None and \
                any(j.running for j in self.measure.pending({"time", "ab"})):
            return
        self._telemetry_wake.set()

    @work(thread=True, group="telemetry", exit_on_error=False)
    def telemetry_loop(self) -> None:
        """One long-lived thread samples when woken: NVML can block (a GPU falling off the bus) and
        must never stall the UI, and one thread costs less than a worker per tick."""
        worker = get_current_worker()
        while not worker.is_cancelled:
            # No timeout: a thread that wakes on its own every fraction of a second preempts the model's
            # threads on a small box. Unmounting sets the event so that the loop sees its cancel.
            self._telemetry_wake.wait()
            self._telemetry_wake.clear()
            if worker.is_cancelled:
                return
            if self._sampler is None:
                continue
            try:
                sample = self._sampler.sample()
                self.measurement_gpu_bytes = self._measurement_gpu_memory()
                self.post_message(TelemetryTick(sample, list(self._sampler.history)))
            except Exception as exc:
                self.post_message(EngineProblem("telemetry", user_message(exc)))

    def _measurement_gpu_memory(self):
        """NVML's figure for the measurement process on the shown GPU (telemetry thread), or None off CUDA."""
        index, pid = self.gpu_index(), self.measurement_pid
        nvml = self._nvml_handle()
        if index is None or pid is None or self.device_kind() != "cuda" or nvml is None:
            return None
        return self.engine.telemetry.process_gpu_memory(nvml, index, pid)

    @while_running
    def on_telemetry_tick(self, message: TelemetryTick) -> None:
        self.last_telemetry = (message.sample, message.history)
        self._show_telemetry(message.sample, message.history)
        self._read_allocator()

    def _read_allocator(self) -> None:
        """Ask the measurement process for its allocator and RSS, only while nothing measures there (a run's
        own memory trace covers that time) and only one question at a time."""
        if self.measure is None or self._memory_job is not None or self.measure.pending(MEASURING_KINDS):
            return

        def answered(event) -> None:
            self._memory_job = None
            if isinstance(event, JobDone):
                self.allocator_reading = event.result

        self._memory_job = self.submit("memory", {}, "reading memory", answered)

    def _show_telemetry(self, sample, history) -> None:
        if self._active_tab() != "memory":
            return  # a hidden pane is not redrawn every tick; it catches up when its tab is shown
        sample, holder = self._with_allocator(sample)
        self.main.query_one(MemoryPane).show_sample(sample, history, self.gpu_index(), run_trace=list(self.run_memory),
                                                    run_kind=self.run_memory_kind, releases=list(self.releases),
                                                    holder=holder, holder_gpu_bytes=self.measurement_gpu_bytes)

    def _with_allocator(self, sample) -> tuple[Any, str]:
        """The sample with the measurement process's allocator figures and RSS (this process holds no model),
        and the name of the process they are from. Injected test sources are shown as they are."""
        reading = self.allocator_reading
        if self._cuda_seam is not None or self._sampler_injected or self.measurement_pid is None:
            return sample, "this process"
        holder = f"measurement process (pid {self.measurement_pid})"
        if reading is None:
            return sample, holder
        import dataclasses

        if reading.get("allocated") is None:  # RSS: the sampler follows that process already
            missing = self.engine.nvml.NA(reading.get("why_none") or "not available")
            return dataclasses.replace(sample, torch_allocated_bytes=missing, torch_reserved_bytes=missing,
                                       torch_peak_bytes=missing), holder
        return dataclasses.replace(sample, torch_allocated_bytes=reading["allocated"],
                                   torch_reserved_bytes=reading["reserved"], torch_peak_bytes=reading["peak"]), holder

    def action_release_memory(self) -> None:
        """Release cached memory through the engine and say what was freed."""
        if self.engine is None or not hasattr(self.engine, "telemetry"):
            self.notify("telemetry is still loading", severity="warning")
            return
        self.release_memory()

    def release_memory(self) -> None:
        """gc + empty_cache (malloc_trim on the CPU) in the measurement process, which holds the model and the
        caching allocator: releasing here would release nothing."""
        kind = self.device_kind() if self.device == "auto" else self.device
        if self._cuda_seam is not None:
            self.release_with_seams(kind)  # tests: the fake GPU's allocator lives in this process
            return

        def answered(event) -> None:
            if isinstance(event, JobFailed):
                self.post_message(EngineProblem("release", event.error))
            else:
                self.post_message(MemoryReleased(event.result))

        self.submit("release", {"device": kind}, "releasing memory", answered)

    @work(thread=True, exclusive=True, group="release", exit_on_error=False)
    def release_with_seams(self, kind: str) -> None:
        try:
            report = self.engine.telemetry.release_memory(device=kind, nvml=self._nvml_handle(), cuda=self._cuda_seam)
        except Exception as exc:
            self.post_message(EngineProblem("release", user_message(exc)))
            return
        self.post_message(MemoryReleased(report))

    @while_running
    def on_memory_released(self, message: MemoryReleased) -> None:
        self.last_release = message.report
        self.releases.append((time.time(), message.report))
        self.notify(message.report.summary(), title="memory released", timeout=6)
        self.request_telemetry()  # an immediate sample, so the chart shows the drop

    # -- navigation, help, screenshot, quit --------------------------------------------------
    def on_tabbed_content_tab_activated(self, event: TabbedContent.TabActivated) -> None:
        # Panes that are not visible are not redrawn every tick; catch up when one is shown.
        tab = self._active_tab()
        if tab == "compare":
            self._refresh_compare()
        elif tab == "timing":
            record = self.history.get(self.current_run_id) if self.current_run_id else None
            if record is not None:
                self._show_current(record)
        elif tab == "memory" and self.last_telemetry is not None:
            self._show_telemetry(*self.last_telemetry)
        elif tab == "history":
            # Marking runs needs the row cursor: the table takes the focus (r, t, p, / still work there).
            self.main.query_one("#history-table").focus()
            if self._history_stale:
                self.refresh_history()

    def action_show_tab(self, name: str) -> None:
        self.main.query_one(TabbedContent).active = f"tab-{name}"

    def action_focus_filter(self) -> None:
        self.main.query_one("#model-filter").focus()

    def action_focus_flags(self) -> None:
        for control in self.main.query("FlagRow Switch, FlagRow Select"):
            if not control.disabled:
                control.focus()
                return

    def action_leave_field(self) -> None:
        self.main.query_one(TabbedContent).query_one("Tabs").focus()

    def action_help(self) -> None:
        # Imported here: Markdown (markdown-it) would cost the first frame ~50 ms for a screen seen later.
        from torchperf_tui.app.screens.help import HelpScreen

        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen())

    def action_screenshot(self) -> None:
        """Save an SVG of the screen and say where."""
        try:
            path = self.save_screenshot(path=self.screenshot_dir)
        except (OSError, TorchperfError) as exc:
            self.notify(user_message(exc), title="screenshot failed", severity="error")
            return
        self.notify(f"saved to {path}", title="screenshot", timeout=8)

    def save_screenshot(self, filename: str | None = None, path: str | None = None,
                        time_format: str | None = None) -> str:
        """Textual's, but written beside the target and renamed, and never over a non-regular file."""
        from textual._files import generate_datetime_filename

        from torchperf_tui.engine.output_files import write_text

        name = filename or generate_datetime_filename(self.title, ".svg", time_format)
        target = os.path.join(os.path.expanduser(path or "./"), name)
        return str(write_text(target, self.export_screenshot()))

    def deliver_screenshot(self, filename: str | None = None, path: str | None = None,
                           time_format: str | None = None) -> str | None:
        """The command palette's screenshot: saved as `s` saves it (this app runs in a terminal, not a browser)."""
        try:
            saved = self.save_screenshot(filename, path or self.screenshot_dir, time_format)
        except (OSError, TorchperfError) as exc:
            self.notify(user_message(exc), title="screenshot failed", severity="error")
            return None
        self.notify(f"saved to {saved}", title="screenshot", timeout=8)
        return None

    # -- the demo: banner, and the settings it changes as a user would ---------------------------
    async def on_event(self, event: events.Event) -> None:
        # Any key takes over from the demo (and then does what it always does).
        if isinstance(event, events.Key) and self.demo is not None and self.demo.running:
            self.demo.stop()
        await super().on_event(event)

    def show_demo_banner(self, title: str, note: str) -> None:
        banner = self.main.query_one("#demo-banner")
        banner.update(f"[b]{title}[/]" + (f"\n{note}" if note else ""))
        banner.display = True

    def set_run_option(self, name: str, value: str) -> None:
        """Change a run option as the selector would show it (without starting a run)."""
        self.run_options[name] = value
        self.main.query_one(RunOptionsPane).set_value(name, value)

    def set_flags(self, flags) -> None:
        """Change the flags as the switches would show them (without starting a run)."""
        self.flags = flags
        self.main.query_one(FlagsPane).set_values(flags)

    async def action_quit(self) -> None:
        """Quit: the measurement process is stopped as the app unmounts."""
        self.workers.cancel_all()
        self.exit()

    def on_unmount(self) -> None:
        self.workers.cancel_group(self, "telemetry")
        self._telemetry_wake.set()  # the telemetry thread waits on it without a timeout
        if self.measure is not None:
            self.measure.stop()

    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        yield from super().get_system_commands(screen)
        yield SystemCommand("Run timing", "Time the chosen model with the current flags", self.action_run)
        yield SystemCommand("Cancel run", "Cancel the timing run in flight", self.action_cancel_run)
        yield SystemCommand("Release memory", "gc + empty_cache / malloc_trim, and show what was freed",
                            self.action_release_memory)
        yield SystemCommand("Save screenshot", "Save an SVG screenshot of the screen", self.action_screenshot)
        yield SystemCommand("Set baseline", "Make the run highlighted in Compare the baseline",
                            self.action_set_baseline)
        yield SystemCommand("Clear runs", "Forget the kept runs", self.action_clear_runs)
        yield SystemCommand("Find max batch", "Largest batch that fits, and samples/s there",
                            self.action_find_max_batch)
        yield SystemCommand("Profile", "torch.profiler top operators and a Chrome trace", self.action_profile)
        yield SystemCommand("Sort profile", "Sort the profiled operators by the next key",
                            self.action_cycle_profile_sort)
        yield SystemCommand("A/B comparison", "The flags before the last flip against the current ones, "
                            "interleaved, with a verdict", self.action_compare_ab)
        yield SystemCommand("Kernels per conv layer", "What each conv layer ran before and after the last flip",
                            self.action_kernels)
        yield SystemCommand("Determinism check", "The same input twice under the current flags",
                            self.action_check_determinism)
        yield SystemCommand("Memory snapshot", "CUDA: the allocator's history for pytorch.org/memory_viz",
                            self.action_memory_snapshot)
        yield SystemCommand("Help", "Keys and a short guide", self.action_help)
        for name in TABS:
            yield SystemCommand(f"Show {name.title()}", f"Switch to the {name} tab",
                                lambda name=name: self.action_show_tab(name))
