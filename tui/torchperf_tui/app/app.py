"""TorchperfApp: starts the measurement process and the engine's warm-up, holds the Session, and binds the
global keys; the main screen (app/screens/main.py) routes between the panes.

This process never imports torch. Every torch job runs in the measurement process (measure/, started through
measure/client.py once the panes are mounted), so the screen cannot disturb what it measures and a model
that crashes cannot take the app down. Each pane owns its jobs (app/pane_jobs.py) and what it shows; the
Session (app/session.py) holds what they share.
"""

from __future__ import annotations

from typing import Any, Callable, Iterable

from textual import events, on
from textual.app import App, SystemCommand
from textual.screen import Screen

from torchperf_tui.core import options
from torchperf_tui.app import commands, screenshots, terminal
from torchperf_tui.app.guards import while_running
from torchperf_tui.app.messages import EngineLoaded, MeasurementEvent, MeasurementNotice
from torchperf_tui.app.screens.main import MainScreen
from torchperf_tui.app.session import Session
from torchperf_tui.app.signals import exit_on_signals
from torchperf_tui.measure.protocol import Ready, Started


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
                 profile_iters: int = 5, demo: bool = False, demo_pace: float = 3.0,
                 measurement: Callable[..., Any] | None = None, model_args: str = "", seq_len: str = "",
                 mlflow_uri: str | None = None) -> None:
        """`nvml`, `cuda`: seams for fake NVML / CUDA backends; `telemetry`: an object with .sample() and
        .history (a frozen source for snapshots); `device_report`: a fixed DeviceReport;
        `poll_telemetry=False` samples once instead of every `interval` seconds; `history_path`: the run
        history file (None: $TORCHPERF_HISTORY, else the user data directory); `max_batch`: the bound of
        the throughput search (None: the engine's default); `profile_iters`: iterations the profiler records;
        `demo`: play the hands-free demo (app/demo.py) on `model`, `demo_pace` seconds per banner;
        `measurement`: makes the measurement process's client (app/session.py; tests: a fake one); `model_args`,
        `seq_len`: the picker's args and seq fields as `model` is first chosen (the CLI's --model-args, --seq-len);
        `mlflow_uri`: log every finished run to this MLflow tracking store (app/mlflow_link.py)."""
        super().__init__()
        terminal.fix_filters(self)  # NO_COLOR: Textual's monochrome filter fails on a segment with no style
        self.session = Session(device=device, warmup=warmup, iters=iters, profile_iters=profile_iters,
                               max_batch=max_batch, history_path=history_path, nvml=nvml, cuda=cuda,
                               device_report=device_report, telemetry=telemetry, measurement=measurement)
        self.initial_model, self.autostart = model, autostart
        self.initial_inputs = {"model_args": model_args, "seq_len": seq_len}
        self.interval = options.interval(interval)  # nan or 1e-9 would flood the event loop: refused here too
        self.poll_telemetry = poll_telemetry
        self.screenshot_dir = screenshot_dir
        self.mlflow = None
        if mlflow_uri:
            from torchperf_tui.app.mlflow_link import MlflowLink  # with --mlflow only: not on the first frame's path

            self.mlflow = MlflowLink(mlflow_uri)
        self.main: MainScreen | None = None
        self._restore_signals = None
        self.demo = None
        if demo:
            from torchperf_tui.app.demo import DemoDirector  # with --demo only: not on the first frame's path

            self.demo = DemoDirector(self, pace=demo_pace)

    def get_default_screen(self) -> Screen:
        self.main = MainScreen(id="main")
        return self.main

    def pane(self, name: str):
        return self.main.pane(name)

    # -- start-up: paint first, then the measurement process and the engine ------------------------
    def on_load(self) -> None:
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
        if self.mlflow is not None:
            self.mlflow.start(self)  # in a worker: MLflow's import and the store's answer stay off the event loop

    def _load_engine(self) -> None:
        self.session.load_engine()
        self.post_message(EngineLoaded())

    @on(MeasurementEvent)
    @while_running
    def _measurement_event(self, message: MeasurementEvent) -> None:
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
        self.main.engine_loaded()

    # -- global keys (navigation keys are the main screen's) ------------------------------------------
    def action_pane(self, name: str, method: str) -> None:
        """A job's key: the pane that owns the job starts it (app/commands.py names which)."""
        self.main.run_key(f"pane('{name}', '{method}')", lambda: getattr(self.pane(name), method)())

    def action_cancel_run(self) -> None:
        """Cancel what measures (each job stops between iterations; one stuck in native code is killed with
        its process after a grace period)."""
        if self.session.cancel_measuring():
            self.pane("timing").cancel_run()
            self.notify("cancelling the run…", timeout=2)

    def action_compare_ab(self) -> None:
        self.main.run_key("compare_ab", self._compare_ab)

    def _compare_ab(self) -> None:
        flags = self.pane("flags")
        arms = flags.arms() if flags.flags is not None else None
        if arms is not None:
            self.pane("compare").start_ab(*arms)
        elif flags.flags is not None:  # the Compare pane says why two identical arms are not compared
            self.pane("compare").start_ab(flags.flags, flags.flags)

    def action_kernels(self) -> None:
        self.main.run_key("kernels", self._kernels)

    def _kernels(self) -> None:
        flags = self.pane("flags")
        if flags.flags is not None:
            self.pane("kernels").start(*(flags.arms() or (flags.flags, flags.flags)))

    def action_mark_history_run(self) -> None:
        if self.main.active_tab() == "history":
            self.pane("history").mark()

    def action_baseline(self) -> None:
        """b: in History, mark the highlighted record as the baseline each timing run is shown against (b again
        unmarks it); elsewhere, make the run highlighted in Compare the baseline of its speed-ups."""
        if not self.main.panes_mounted():
            return
        if self.main.active_tab() == "history":
            self.pane("timing").query_one("#run-baseline").set_baseline(self.pane("history").toggle_baseline())
        else:
            self.pane("compare").set_baseline()

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
