"""TorchperfApp: composes the main screen and wires global keys and the messages panes send up.

This process never imports torch. Every torch job runs in the measurement process (measure/, started through
measure/client.py once the panes are mounted), so the screen cannot disturb what it measures and a model
that crashes cannot take the app down. Each pane owns its jobs (app/pane_jobs.py) and what it shows; the
Session (app/session.py) holds what they share. The App passes a few facts between panes, nothing more.
"""

from __future__ import annotations

from typing import Any, Iterable

from textual import events, on
from textual.app import App, SystemCommand
from textual.screen import Screen

from torchperf_tui import options
from torchperf_tui.app import commands, screenshots, terminal
from torchperf_tui.app.guards import while_running
from torchperf_tui.app.messages import EngineLoaded, HistoryChanged, MeasurementEvent, MeasurementNotice, RunsChanged
from torchperf_tui.app.screens.main import MainScreen
from torchperf_tui.app.session import Session


class TorchperfApp(App):
    """How fast a PyTorch model runs on this box, and why."""

    CSS_PATH = "app.tcss"
    TITLE = "torchperf"

    def format_title(self, title: str, sub_title: str):
        """'torchperf · CPU: …': Textual joins them with an em dash, which terminals and SVG fonts draw at
        ambiguous widths (it read 'torchperf—' with its space swallowed)."""
        from textual.content import Content

        if not sub_title:
            return Content(title)
        return Content.assemble(Content(f"{title} · "), Content(sub_title).stylize("dim"))
    ENABLE_COMMAND_PALETTE = True
    BINDINGS = commands.BINDINGS

    def __init__(self, model: str | None = None, autostart: bool = False, interval: float = 0.5,
                 device: str = "auto", *, nvml: Any = None, cuda: Any = None, telemetry: Any = None,
                 device_report: Any = None, warmup: int | str = 10, iters: int = 64,
                 screenshot_dir: str | None = None, poll_telemetry: bool = True,
                 history_path: str | None = None, max_batch: int | None = None,
                 profile_iters: int = 5, demo: bool = False, demo_pace: float = 3.0) -> None:
        """`nvml`, `cuda`: seams for fake NVML / CUDA backends; `telemetry`: an object with .sample() and
        .history (a frozen source for snapshots); `device_report`: a fixed DeviceReport;
        `poll_telemetry=False` samples once instead of every `interval` seconds; `history_path`: the run
        history file (None: $TORCHPERF_HISTORY, else the user data directory); `max_batch`: the bound of
        the throughput search (None: the engine's default); `profile_iters`: iterations the profiler records;
        `demo`: play the hands-free demo (app/demo.py) on `model`, `demo_pace` seconds per banner."""
        super().__init__()
        terminal.fix_filters(self)  # NO_COLOR: Textual's monochrome filter fails on a segment with no style
        self.session = Session(device=device, warmup=warmup, iters=iters, profile_iters=profile_iters,
                               max_batch=max_batch, history_path=history_path, nvml=nvml, cuda=cuda,
                               device_report=device_report, telemetry=telemetry)
        self.initial_model, self.autostart = model, autostart
        self.interval = options.interval(interval)  # nan or 1e-9 would flood the event loop: refused here too
        self.poll_telemetry = poll_telemetry
        self.screenshot_dir = screenshot_dir
        self.main: MainScreen | None = None
        self._probe_failed = False
        self._restore_signals = None
        self.demo = None
        if demo:
            from torchperf_tui.app.demo import DemoDirector

            self.demo = DemoDirector(self, pace=demo_pace)

    def get_default_screen(self) -> Screen:
        self.main = MainScreen(id="main")
        return self.main

    def pane(self, name: str):
        return self.main.pane(name)

    # -- start-up: paint first, then the measurement process and the engine ------------------------
    def on_load(self) -> None:
        from torchperf_tui.app.signals import exit_on_signals

        self._restore_signals = exit_on_signals(self)  # SIGTERM / SIGHUP (a dropped SSH session) exit as `q` does

    def on_mount(self) -> None:
        self.sub_title = "loading engine…"
        self._when_panes_mounted()

    def _when_panes_mounted(self) -> None:
        """The jobs start once the panes that own them can answer."""
        if self.main.panes_mounted():
            self.call_after_refresh(self._start)
        else:
            self.set_timer(0.02, self._when_panes_mounted)

    def _start(self) -> None:
        self.session.start(lambda event: self.post_message(MeasurementEvent(event)),
                           lambda text: self.post_message(MeasurementNotice(text)))
        self.pane("picker").load_catalogue()
        self.run_worker(self._load_engine, thread=True, group="engine", exit_on_error=False)

    def _load_engine(self) -> None:
        self.session.load_engine()
        self.post_message(EngineLoaded())

    @on(MeasurementEvent)
    @while_running
    def _measurement_event(self, message: MeasurementEvent) -> None:
        from torchperf_tui.measure.protocol import Ready, Started

        if isinstance(message.event, Ready):
            self.session.measurement_pid = message.event.pid
            self.pane("memory").follow_process(message.event.pid)  # its RSS where the model lives
        elif not isinstance(message.event, Started):
            self.session.dispatch(message.event)

    @on(MeasurementNotice)
    def _measurement_notice(self, message: MeasurementNotice) -> None:
        self.notify(message.text, title="measurement process", severity="error", timeout=8)  # the failed run says it too

    @on(EngineLoaded)
    @while_running
    def _engine_loaded(self, message: EngineLoaded) -> None:
        session = self.session
        for name, why in session.missing.items():
            self.notify(f"engine module {name} not available: {why}", severity="warning", timeout=8)
        if "textual_plot" not in session.missing:
            from torchperf_tui.app.widgets.timing.histogram import _PlotHolder

            for holder in self.main.query(_PlotHolder):
                holder.attach_plot()
        if session.has("flags"):
            self.pane("flags").flags = session.engine.flags.Flags()
        self.pane("device").probe()
        self.pane("memory").start_telemetry(self.interval, self.poll_telemetry)
        self.pane("history").refresh_history()

    # -- facts passed between panes -----------------------------------------------------------------
    def _show_flags(self) -> None:
        """The switches, once the engine and the device report (which flags apply where) are in."""
        session = self.session
        if not session.has("flags") or (not session.applicability and not self._probe_failed):
            return
        self.pane("flags").show_applicability(session.engine.flags.FLAG_SPECS, session.device_kind(),
                                              session.flag_applies)
        self.pane("device").show_flags_note(session.device_kind(), self.pane("flags").reasons)

    @while_running
    def on_device_pane_probed(self, message) -> None:
        self._device_known()

    @while_running
    def on_device_pane_chosen(self, message) -> None:
        self.session.device = message.device
        self._device_known()

    def _device_known(self) -> None:
        session, report = self.session, self.session.report
        if report is not None and session.device.startswith("cuda") and not report.cuda_available:
            # Never a silent fall-back to the CPU: runs on the device asked for fail, and this says why.
            self.sub_title = f"{session.device}: not available"
            self.notify(f"--device {session.device}: no CUDA device here ({report.cuda_reason}). Runs on it fail: "
                        "choose cpu in the Device tab (4)", title="device", severity="error", timeout=15)
        elif report is not None:
            from torchperf_tui.app.widgets.device.device_pane import short_name

            self.sub_title = short_name(report, session.resolved_device())
        self._show_flags()
        self.pane("picker").update_dtype_note()
        self.pane("memory").redraw()

    @while_running
    def on_device_pane_probe_failed(self, message) -> None:
        self.notify(f"device: {message.error}", severity="error", timeout=8)
        self._probe_failed = True
        self._show_flags()

    @while_running
    def on_model_picker_catalogue_ready(self, message) -> None:
        timing = self.pane("timing")
        if message.error:
            self.notify(f"models: {message.error}", severity="error", timeout=8)
            timing.model_line = (f"model catalogue not available: {message.error}")
            return
        timing.model_line = ("pick a model: / to filter, ⏎ to choose")
        if self.initial_model and self.pane("picker").spec is None:
            self.pane("picker").choose(self.initial_model)
            if self.demo is not None:
                self.demo.start()
            elif self.autostart:
                timing.start_run()

    @while_running
    def on_model_picker_analysing(self, message) -> None:
        self.pane("timing").model_line = f"[b]{message.spec}[/] · analysing…"
        for name in ("timing", "throughput", "profile", "kernels"):
            self.pane(name).model_chosen(message.spec)

    @while_running
    def on_model_picker_analysed(self, message) -> None:
        from torchperf_tui.app.widgets.layers.layers_pane import complexity_summary

        self.pane("timing").model_line = (f"[b]{message.spec}[/] · {complexity_summary(message.complexity)}")
        self.pane("layers").show_complexity(message.spec, message.complexity)

    @while_running
    def on_model_picker_failed(self, message) -> None:
        self.notify(message.error, title=message.spec, severity="error", timeout=8)
        if self.demo is not None:
            self.demo.stop(f"demo stopped: {message.spec}: {message.error}")
        self.pane("timing").model_line = (f"[b]{message.spec}[/] · [b $error]error:[/] {message.error}")
        self.pane("layers").show_error(message.spec, message.error)

    @while_running
    def on_timing_pane_roofline_ready(self, message) -> None:
        if message.result.model == self.pane("picker").spec:
            self.pane("layers").show_roofline(message.result.layers, run=message.run, label=message.label)
        self.pane("device").show_roofline(message.label, message.notes)

    @while_running
    def on_flags_pane_changed(self, message) -> None:
        """A flip re-measures: the old flags against the new interleaved (on flip: A/B), or a new run."""
        if self.pane("picker").spec is None or not self.session.has("timing"):
            return
        if self.pane("options").options["flip"] == "ab" and self.session.has("abtest"):
            self.pane("compare").start_ab(message.before, message.after)
        else:
            self.pane("timing").start_run()

    @while_running
    def on_run_options_pane_changed(self, message) -> None:
        if message.name == "step":  # the Layers tab counts a training step's backward per layer
            self.pane("picker").reanalyse()
        if message.name in ("shapes", "compile", "step", "amp") and self.pane("picker").spec is not None \
                and self.session.has("timing"):
            self.pane("timing").start_run()

    @on(RunsChanged)
    @while_running
    def _runs_changed(self, message: RunsChanged) -> None:
        self.pane("compare").refresh_runs()

    @on(HistoryChanged)
    @while_running
    def _history_changed(self, message: HistoryChanged) -> None:
        self.pane("history").refresh_history()

    # -- global keys (navigation keys are the main screen's) ------------------------------------------
    def action_pane(self, name: str, method: str) -> None:
        """A job's key: the pane that owns the job starts it (app/commands.py names which)."""
        if self.main.panes_mounted():  # not in the instant before they mount
            getattr(self.pane(name), method)()

    def action_cancel_run(self) -> None:
        """Cancel what measures (each job stops between iterations; one stuck in native code is killed with
        its process after a grace period)."""
        jobs = self.session.measuring()
        for job in jobs:
            self.session.cancel(job.job_id)
        if jobs:
            self.pane("timing").cancel_run()
            self.notify("cancelling the run…", timeout=2)

    def action_compare_ab(self) -> None:
        if not self.main.panes_mounted():
            return
        flags = self.pane("flags")
        arms = flags.arms() if flags.flags is not None else None
        if arms is not None:
            self.pane("compare").start_ab(*arms)
        elif flags.flags is not None:  # the Compare pane says why two identical arms are not compared
            self.pane("compare").start_ab(flags.flags, flags.flags)

    def action_kernels(self) -> None:
        if not self.main.panes_mounted():
            return
        flags = self.pane("flags")
        if flags.flags is not None:
            self.pane("kernels").start(*(flags.arms() or (flags.flags, flags.flags)))

    def action_mark_history_run(self) -> None:
        if self.main.active_tab() == "history":
            self.pane("history").mark()

    def action_help(self) -> None:
        from torchperf_tui.app.screens.help import HelpScreen  # Markdown: not on the first frame's path

        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen())

    def action_screenshot(self) -> None:
        self.deliver_screenshot(path=self.screenshot_dir)

    def save_screenshot(self, filename: str | None = None, path: str | None = None,
                        time_format: str | None = None) -> str:
        """Textual's, but written beside the target and renamed, and never over a non-regular file."""
        return screenshots.save(self, filename, path, time_format)

    def deliver_screenshot(self, filename: str | None = None, path: str | None = None,
                           time_format: str | None = None) -> str | None:
        """`s` and the command palette's screenshot: saved (this app runs in a terminal, not a browser)."""
        screenshots.deliver(self, filename, path or self.screenshot_dir, time_format)
        return None

    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        yield from super().get_system_commands(screen)
        for title, help_text, action in commands.PALETTE:
            yield SystemCommand(title, help_text, lambda action=action: self.run_action(action))

    # -- the demo: any key takes over ---------------------------------------------------------------
    async def on_event(self, event: events.Event) -> None:
        if isinstance(event, events.Key) and self.demo is not None:
            if self.demo.running:
                self.demo.stop()
            else:
                self.main.hide_banner()  # the demo is over: its last banner goes with the next key
        await super().on_event(event)

    def on_resize(self, event: events.Resize) -> None:
        self.session.disturbances.resized(event.size)  # a resize during a timed run marks the run (app/runs.py)

    async def action_quit(self) -> None:
        self.workers.cancel_all()
        self.exit()

    def on_unmount(self) -> None:
        self.session.stop()  # the measurement process goes with the app
        if self._restore_signals is not None:
            self._restore_signals()
