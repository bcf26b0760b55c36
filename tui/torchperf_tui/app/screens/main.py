"""The main screen: model picker and flags on the left, the result tabs on the right. It answers the panes'
one question about the sidebar (what is selected, frozen (measure/selection.py), at the moment a job starts)
and routes between them: a pane's message comes up here and the screen tells the panes it concerns."""

from __future__ import annotations

import importlib
from collections.abc import Callable

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.css.query import NoMatches
from textual.containers import Horizontal, VerticalScroll
from textual.screen import Screen
from textual.widgets import Header, Input, Label, Static, TabbedContent, TabPane

from torchperf_tui.app.guards import while_running
from torchperf_tui.app.messages import HistoryChanged, RunsChanged
from torchperf_tui.app.screens.layout import TABS, FitsTerminal
from torchperf_tui.app.screens.steady_footer import SteadyFooter
from torchperf_tui.core.flag_table import FLAG_ENTRIES
from torchperf_tui.core.run_option_table import run_option
from torchperf_tui.wording.complexity import complexity_summary
from torchperf_tui.wording.device import short_name

# name -> (widget id, module under app/widgets, class). The modules load only after the first frame: the
# panes and their widgets (DataTable, ProgressBar, plots) are not needed to paint it.
PANES = {"picker": ("picker", "picker.model_picker", "ModelPicker"),
         "flags": ("flags", "flags.flags_pane", "FlagsPane"),
         "options": ("run-options", "flags.run_options", "RunOptionsPane"),
         "timing": ("timing", "timing.timing_pane", "TimingPane"),
         "compare": ("compare", "compare.compare_pane", "ComparePane"),
         "layers": ("layers", "layers.layers_pane", "LayersPane"),
         "device": ("device", "device.device_pane", "DevicePane"),
         "memory": ("memory", "memory.memory_pane", "MemoryPane"),
         "throughput": ("throughput", "throughput.throughput_pane", "ThroughputPane"),
         "profile": ("profile", "profile.profile_pane", "ProfilePane"),
         "history": ("history", "history.history_pane", "HistoryPane"),
         "kernels": ("kernels", "kernels.kernels_pane", "KernelsPane"),
         "sweep": ("sweep", "sweep.sweep_pane", "SweepPane"),
         "why": ("why", "why.why_pane", "WhyPane"),
         "generation": ("generation", "timing.generation_view", "GenerationView")}  # in the Timing tab, under the run


# The run options a flip in A/B mode compares, old against new, as it compares a flag's (an arm's SPEC sets them).
AB_OPTIONS = ("quant", "attn", "compile")


def pane_class(name: str):
    _, module, cls = PANES[name]
    return getattr(importlib.import_module(f"torchperf_tui.app.widgets.{module}"), cls)


class MainScreen(FitsTerminal, Screen):
    """Everything on one screen; each pane fills itself from the jobs it starts. The first frame is the
    header, the sidebar's title (hidden on a short terminal), a tab bar drawn as text and the footer; the panes
    and the real tabs are mounted right after it (a bare Textual app paints in ~0.4 s; 9 tabs of widgets would
    add a third)."""

    AUTO_FOCUS = None  # nothing to focus in the first frame: the model list takes it once mounted
    _panes_in = False  # panes_mounted: once in, the panes stay for the screen's life (the App asks before its mount)
    _tabs_in = False  # _mount_panes has mounted the sidebar's panes and the tabs'

    BINDINGS = [
        Binding("f", "focus_flags", "Flags", show=False),
        Binding("escape", "leave_field", "Leave field", show=False),
        *[Binding(str(i + 1), f"show_tab('{name}')", name.title(), show=False) for i, name in enumerate(TABS[:9])],
    ]

    def compose(self) -> ComposeResult:
        yield Header(show_clock=False, icon="⏱")
        banner = Static("", id="demo-banner")
        banner.display = False  # shown by the demo only
        yield banner
        with Horizontal(id="body"):
            with VerticalScroll(id="sidebar"):
                yield Label("Model", classes="section-title", id="picker-title")
            tabs = Text(no_wrap=True, overflow="ellipsis")
            for i, name in enumerate(TABS):
                tabs.append(f" {name.title()} ", style="bold" if i == 0 else "dim")
            yield Static(tabs, id="tabs-placeholder")
        too_small = Static("", id="too-small")
        too_small.display = False
        yield too_small
        yield SteadyFooter()

    def on_mount(self) -> None:
        self._sidebar_chosen = False  # the user pressed h: the width no longer decides
        self._probe_failed = False  # the device probe failed: the flags show without its applicability
        self._engine_in = self._catalogue_in = False  # start-up: a job's key is held until both are in
        self._held: tuple[str, Callable[[], None]] | None = None  # (action, start) of the last job key pressed then
        self._catalogue_error: str | None = None
        self.fit_terminal(self.app.size)  # the first frame is drawn in the layout this size gets
        self.call_after_refresh(self._mount_panes)

    async def _mount_panes(self) -> None:
        if not self.app.is_running:
            return  # quit before the panes were up (a key or a signal in the first instant)
        await self.query_one("#sidebar").mount_all([pane_class(name)(id=PANES[name][0])
                                                    for name in ("picker", "flags", "options")])
        if not self.app.is_running or not self.is_attached:
            return
        tabs = TabbedContent(initial="tab-timing", id="tabs")
        for name in TABS:
            tabs.compose_add_child(TabPane(name.title(), pane_class(name)(id=PANES[name][0]), id=f"tab-{name}"))
        placeholder = self.query_one("#tabs-placeholder")
        await self.query_one("#body").mount(tabs, after=placeholder)
        await placeholder.remove()
        self._tabs_in = True
        self.call_after_refresh(self._fit_tab_labels)
        # Start in the model list, not a text field: arrows browse, `/` types, and r/q/e keys work at once.
        focused = self.focused  # the scrolling sidebar or the tabs take it as they mount, not a user
        if focused is None or focused.id == "sidebar" or type(focused).__name__ in ("Tabs", "ContentTabs"):
            self.set_focus(self.query_one("#model-list"))

    def pane(self, name: str):
        """The pane called `name` in PANES."""
        return self.query_one(f"#{PANES[name][0]}")

    def panes_mounted(self) -> bool:
        """The panes mount just after the first frame (_mount_panes), their selects a little after them. Looked up
        until they are in, then remembered: the App polls it at start-up, and a caller that polls it (a job's key, a
        script waiting on an A/B) took half a core when each look walked the whole screen once per pane; a look is
        now one walk, for the selects, once the panes are in."""
        if not self._panes_in:
            self._panes_in = self._tabs_in and all(select.query("SelectCurrent") for select in self.query("Select"))
        return self._panes_in

    # -- job keys ---------------------------------------------------------------------------------------------
    def run_key(self, action: str, start: Callable[[], None]) -> None:
        """A job's key (`action`: its binding's, for the notice's words): `start` starts the job; pressed while the
        app starts (the panes mounting, the engine or the model catalogue loading), it is held, said, and started
        once they are in (the last one pressed)."""
        if self.panes_mounted() and self._engine_in and self._catalogue_in:
            start()
            return
        if self._held is None:
            what = next((b.description for b in self.app.BINDINGS if getattr(b, "action", "") == action), action)
            self.app.notify(f"{what}: held until the engine has loaded", timeout=4)
        self._held = (action, start)

    def _started(self, engine: bool = False, catalogue: bool = False) -> None:
        """The engine or the catalogue is in. Once both are (in either order: a warm box lists the catalogue
        first), the model given on the command line is chosen (choosing needs the engine's registry), then the
        demo or --autostart or a held key goes."""
        was_in = self._engine_in and self._catalogue_in
        self._engine_in |= engine
        self._catalogue_in |= catalogue
        if was_in or not (self._engine_in and self._catalogue_in):
            return
        app, picker = self.app, self.pane("picker")
        if not self._catalogue_error and app.initial_model and picker.model is None:
            picker.set_inputs(**app.initial_inputs)
            picker.choose(app.initial_model)
            if app.demo is not None:
                app.demo.start()
            elif app.autostart:
                self._held = self._held or ("autostart", lambda: self.pane("timing").start_run())
        if self._held is not None:
            held, self._held = self._held, None
            self.run_key(*held)

    # -- routing: facts passed between panes ----------------------------------------------------------
    def engine_loaded(self) -> None:
        """The session's engine modules are in (those that failed are in session.missing): the panes start."""
        session = self.app.session
        for name, why in session.missing.items():
            self.app.notify(f"engine module {name} not available: {why}", severity="warning", timeout=8)
        if "textual_plot" not in session.missing:
            # Local: the panes' modules load after the first frame (pane_class imports them).
            from torchperf_tui.app.widgets.timing.histogram import PlotHolder
            for holder in self.query(PlotHolder):
                holder.attach_plot()
        if session.has("flags"):
            from torchperf_tui.engine.measurements.flags import Flags  # loaded by now: the engine is in

            self.pane("flags").flags = Flags()
        self.pane("device").probe()
        self.pane("memory").start_telemetry(self.app.interval, self.app.poll_telemetry)
        self.pane("history").refresh_history()
        self._started(engine=True)

    def _show_flags(self) -> None:
        """The switches, once the engine and the device report (which flags apply where) are in."""
        session = self.app.session
        if not session.has("flags") or (not session.applicability and not self._probe_failed):
            return
        self.pane("flags").show_applicability(FLAG_ENTRIES, session.device_kind(), session.flag_applies)
        self.pane("device").show_flags_note(session.device_kind(), self.pane("flags").reasons)

    @while_running
    def on_device_pane_probed(self, message) -> None:
        self._device_known()

    @while_running
    def on_device_pane_chosen(self, message) -> None:
        self.app.session.device = message.device
        self._device_known()

    def _device_known(self) -> None:
        app, session, report = self.app, self.app.session, self.app.session.report
        if report is not None and session.device.startswith("cuda") and not report.cuda_available:
            # Never a silent fall-back to the CPU: runs on the device asked for fail, and this says why.
            app.sub_title = f"{session.device}: not available"
            app.notify(f"--device {session.device}: no CUDA device here ({report.cuda_reason}). Runs on it fail: "
                       "choose cpu in the Device tab (4)", title="device", severity="error", timeout=15)
        elif report is not None:
            app.sub_title = short_name(report, session.resolved_device())
        self._show_flags()
        self.pane("picker").update_dtype_note()
        self.pane("memory").redraw()
        self.pane("device").device_known()

    @while_running
    def on_device_pane_probe_failed(self, message) -> None:
        self.app.notify(f"device: {message.error}", severity="error", timeout=8)
        self._probe_failed = True
        self._show_flags()

    @while_running
    def on_model_picker_catalogue_ready(self, message) -> None:
        app, timing = self.app, self.pane("timing")
        if message.error:
            app.notify(f"models: {message.error}", severity="error", timeout=8)
            timing.model_line = (f"model catalogue not available: {message.error}")
        else:
            timing.model_line = ("pick a model: / to filter, ⏎ to choose")
        self._catalogue_error = message.error
        self._started(catalogue=True)

    @while_running
    def on_model_picker_analysing(self, message) -> None:
        self.pane("timing").model_line = f"[b]{message.model}[/] · analysing…"
        for name in ("timing", "throughput", "profile", "kernels", "sweep", "generation", "why"):
            self.pane(name).model_chosen(message.model)

    @while_running
    def on_model_picker_analysed(self, message) -> None:
        self.pane("timing").model_line = (f"[b]{message.model}[/] · {complexity_summary(message.complexity)}")
        self.pane("layers").show_complexity(message.model, message.complexity)

    @while_running
    def on_model_picker_failed(self, message) -> None:
        self.app.notify(message.error, title=message.model, severity="error", timeout=8)
        if self.app.demo is not None:
            self.app.demo.stop(f"demo stopped: {message.model}: {message.error}")
        self.pane("timing").model_line = (f"[b]{message.model}[/] · [b $error]error:[/] {message.error}")
        self.pane("layers").show_error(message.model, message.error)

    @while_running
    def on_timing_pane_roofline_ready(self, message) -> None:
        if message.result.model == self.pane("picker").model:
            self.pane("layers").show_roofline(message.result.layers, run=message.run, label=message.label)
        self.pane("device").show_roofline(message.label, message.notes)

    @while_running
    def on_flags_pane_changed(self, message) -> None:
        """A flip re-measures: the old flags against the new interleaved (on flip: A/B), or a new run."""
        if self.pane("picker").model is None or not self.app.session.has("timing"):
            return
        if self.pane("options").options["flip"] == "ab" and self.app.session.has("abtest"):
            self.pane("compare").start_ab(message.before, message.after)
        else:
            self.pane("timing").start_run()

    @while_running
    def on_run_options_pane_changed(self, message) -> None:
        if message.name == "step":  # the Layers tab counts a training step's backward per layer
            self.pane("picker").reanalyse()
        if self.pane("picker").model is None or not self.app.session.has("timing"):
            return
        if message.name in AB_OPTIONS and self.pane("options").options["flip"] == "ab" \
                and self.app.session.has("abtest"):  # in A/B mode: the model as it was against as chosen now
            flags = self.pane("flags").flags
            option = run_option(message.name)
            self.pane("compare").start_ab(flags, flags, {message.name: option.run_value(message.value)},
                                          a_options={message.name: option.run_value(message.before)})
        elif message.name in ("shapes", "compile", "quant", "attn", "step", "amp"):
            self.pane("timing").start_run()

    @on(RunsChanged)
    @while_running
    def _runs_changed(self, message: RunsChanged) -> None:
        self.pane("compare").refresh_runs()
        self.pane("generation").timing_run(self.pane("timing").record)  # a newer run takes the histogram back

    @on(HistoryChanged)
    @while_running
    def _history_changed(self, message: HistoryChanged) -> None:
        self.pane("history").refresh_history()

    # -- navigation ----------------------------------------------------------------------------------
    def on_tabbed_content_tab_activated(self, event: TabbedContent.TabActivated) -> None:
        name = self.active_tab()
        if name in PANES and self.query(f"#{PANES[name][0]}"):
            pane = self.pane(name)
            if hasattr(pane, "on_shown"):
                pane.on_shown()  # hidden panes are not redrawn: they catch up when shown

    def selection(self):
        """The model, input, device, flags and run options chosen now, frozen (None: no model chosen)."""
        picker = self.pane("picker")
        if picker.model is None:
            return None
        # Local: the engine loads in a worker thread after the first frame (Session.load_engine).
        from torchperf_tui.measure.selection import Selection

        settings = picker.settings()
        session = self.app.session
        options = self.pane("options").options
        step, _, optimizer = options["step"].partition(":")
        return Selection(model=picker.model, shape=settings["shape"], batch=settings["batch"], dtype=settings["dtype"],
                         channels_last=settings["channels_last"], device=session.device,
                         flags=self.pane("flags").flags, shapes=options["shapes"], compile=options["compile"],
                         warmup=session.warmup, iters=session.iters, step=step, optimizer=optimizer or "sgd",
                         amp=run_option("amp").run_value(options["amp"]),
                         quant=run_option("quant").run_value(options["quant"]),
                         attn=run_option("attn").run_value(options["attn"]),
                         model_args=settings["model_args"], seq_len=settings["seq_len"])

    def engine_ready(self, what: str, module: str) -> bool:
        """Whether the engine module a job of `what` needs is in; if not, a line saying it is loading or missing."""
        session = self.app.session
        if session.has(module):
            return True
        why = session.missing.get(module)
        self.app.notify(f"{what} not available: {why}" if why else f"the {what} engine is still loading",
                        severity="warning")
        return False

    def ready_selection(self, what: str, module: str = "timing"):
        """The selection for a job, or None (and a line saying why) while the engine module it needs is loading
        or missing, or no model is chosen."""
        if not self.engine_ready(what, module):
            return None
        if self.pane("flags").flags is None:
            self.app.notify(f"the {what} engine is still loading", severity="warning")
            return None
        selection = self.selection()
        if selection is None:
            self.app.notify("pick a model first: / to filter, ⏎ to choose", severity="warning")
        return selection

    def default_shape(self) -> tuple | None:
        """The chosen model's input as its analysis found it (None until analysed)."""
        complexity = self.pane("picker").complexity
        return tuple(complexity.input_shape) if complexity is not None else None

    def active_tab(self) -> str:
        try:
            return self.query_one(TabbedContent).active.removeprefix("tab-")
        except NoMatches:
            return ""  # shutting down

    def show_tab(self, name: str) -> None:
        if self.query(TabbedContent):  # a key pressed in the instant before the tabs mount does nothing
            self.query_one(TabbedContent).active = f"tab-{name}"

    def action_show_tab(self, name: str) -> None:
        self.show_tab(name)

    def check_action(self, action: str, parameters: tuple) -> bool | None:
        # '/' is read before any widget sees it (app/commands.py): in a text field it is a character of the field's
        if action == "focus_filter" and isinstance(self.focused, Input):
            return False
        return True

    def action_focus_filter(self) -> None:
        # At once, not after the keys already read (Widget.focus waits its turn): over SSH the name typed after '/'
        # arrives with it, and its letters are the filter's, never commands (r would run the highlighted model).
        if self.query("#model-filter"):
            self.set_focus(self.query_one("#model-filter"))

    def action_focus_flags(self) -> None:
        for control in self.query("FlagRow Switch, FlagRow Select"):
            if not control.disabled:
                control.focus()
                return

    def action_leave_field(self) -> None:
        if self.query(TabbedContent):
            self.query_one(TabbedContent).query_one("Tabs").focus()

    def show_banner(self, title: str, note: str) -> None:
        """The demo's banner over the tabs."""
        banner = self.query_one("#demo-banner", Static)
        banner.update(f"[b]{title}[/]" + (f"\n{note}" if note else ""))
        banner.display = True

    def hide_banner(self) -> None:
        self.query_one("#demo-banner", Static).display = False
