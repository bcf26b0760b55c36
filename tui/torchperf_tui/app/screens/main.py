"""The main screen: model picker and flags on the left, the result tabs on the right. It answers the panes'
one question about the sidebar: what is selected, frozen (jobs/selection.py), at the moment a job starts."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.css.query import NoMatches
from textual.containers import Horizontal, VerticalScroll
from textual.lazy import Lazy
from textual.screen import Screen
from textual.widgets import Footer, Header, Label, Static, TabbedContent, TabPane

from torchperf_tui.app.widgets.compare.compare_pane import ComparePane
from torchperf_tui.app.widgets.device.device_pane import DevicePane
from torchperf_tui.app.widgets.flags.flags_pane import FlagsPane
from torchperf_tui.app.widgets.flags.run_options import RunOptionsPane
from torchperf_tui.app.widgets.history.history_pane import HistoryPane
from torchperf_tui.app.widgets.kernels.kernels_pane import KernelsPane
from torchperf_tui.app.widgets.layers.layers_pane import LayersPane
from torchperf_tui.app.widgets.memory.memory_pane import MemoryPane
from torchperf_tui.app.widgets.picker.model_picker import ModelPicker
from torchperf_tui.app.widgets.profile.profile_pane import ProfilePane
from torchperf_tui.app.widgets.throughput.throughput_pane import ThroughputPane
from torchperf_tui.app.widgets.timing.timing_pane import TimingPane

TABS = ("timing", "compare", "layers", "device", "memory", "throughput", "profile", "history", "kernels")
PANES = {"timing": TimingPane, "compare": ComparePane, "layers": LayersPane, "device": DevicePane,
         "memory": MemoryPane, "throughput": ThroughputPane, "profile": ProfilePane, "history": HistoryPane,
         "kernels": KernelsPane, "picker": ModelPicker, "flags": FlagsPane, "options": RunOptionsPane}


class MainScreen(Screen):
    """Everything on one screen; each pane fills itself from the jobs it starts."""

    # Start in the model list, not a text field: arrows browse, `/` types, and r/q/e keys work at once.
    AUTO_FOCUS = "#model-list"

    BINDINGS = [
        Binding("f", "focus_flags", "Flags", show=False),
        Binding("escape", "leave_field", "Leave field", show=False),
        *[Binding(str(i + 1), f"show_tab('{name}')", name.title(), show=False) for i, name in enumerate(TABS)],
    ]

    def compose(self) -> ComposeResult:
        yield Header(show_clock=False, icon="⏱")
        banner = Static("", id="demo-banner")
        banner.display = False  # shown by the demo only
        yield banner
        with Horizontal(id="body"):
            with VerticalScroll(id="sidebar"):
                # Titles and placeholders paint in the first frame; the controls mount right after it.
                yield Label("Model", classes="section-title", id="picker-title")
                yield Lazy(ModelPicker(id="picker"))
                yield Lazy(FlagsPane(id="flags"))
                yield Lazy(RunOptionsPane(id="run-options"))
            with TabbedContent(initial="tab-timing", id="tabs"):
                with TabPane("Timing", id="tab-timing"):
                    yield Lazy(TimingPane(id="timing"))
                # The hidden tabs mount just after the first frame (Lazy): a faster first paint.
                with TabPane("Compare", id="tab-compare"):
                    yield Lazy(ComparePane(id="compare"))
                with TabPane("Layers", id="tab-layers"):
                    yield Lazy(LayersPane(id="layers"))
                with TabPane("Device", id="tab-device"):
                    yield Lazy(DevicePane(id="device"))
                with TabPane("Memory", id="tab-memory"):
                    yield Lazy(MemoryPane(id="memory"))
                with TabPane("Throughput", id="tab-throughput"):
                    yield Lazy(ThroughputPane(id="throughput"))
                with TabPane("Profile", id="tab-profile"):
                    yield Lazy(ProfilePane(id="profile"))
                with TabPane("History", id="tab-history"):
                    yield Lazy(HistoryPane(id="history"))
                with TabPane("Kernels", id="tab-kernels"):
                    yield Lazy(KernelsPane(id="kernels"))
        yield Footer()

    def selection(self):
        """The model, input, device, flags and run options chosen now, frozen (None: no model chosen)."""
        from torchperf_tui.jobs.selection import Selection

        picker = self.query_one(ModelPicker)
        if picker.spec is None:
            return None
        settings = picker.settings()
        session = self.app.session
        options = self.query_one(RunOptionsPane).options
        return Selection(spec=picker.spec, shape=settings["shape"], batch=settings["batch"], dtype=settings["dtype"],
                         channels_last=settings["channels_last"], device=session.device,
                         flags=self.query_one(FlagsPane).flags, shapes=options["shapes"], compile=options["compile"],
                         warmup=session.warmup, iters=session.iters)

    def ready_selection(self, what: str, module: str = "timing"):
        """The selection for a job, or None (and a line saying why) while the engine module it needs is loading
        or missing, or no model is chosen."""
        session = self.app.session
        if not session.has(module) or self.query_one(FlagsPane).flags is None:
            why = session.missing.get(module)
            self.app.notify(f"{what} not available: {why}" if why else f"the {what} engine is still loading",
                            severity="warning")
            return None
        selection = self.selection()
        if selection is None:
            self.app.notify("pick a model first: / to filter, ⏎ to choose", severity="warning")
        return selection

    def default_shape(self) -> tuple | None:
        """The chosen model's input as its analysis found it (None until analysed)."""
        complexity = self.query_one(ModelPicker).complexity
        return tuple(complexity.input_shape) if complexity is not None else None

    def pane(self, name: str):
        """The pane called `name` in PANES."""
        return self.query_one(PANES[name])

    def panes_mounted(self) -> bool:
        """The panes mount a little after the first frame (Lazy), their selects a little after them."""
        return all(self.query(pane) for pane in PANES.values()) and \
            all(select.query("SelectCurrent") for select in self.query("Select"))

    # -- navigation ----------------------------------------------------------------------------------
    def on_tabbed_content_tab_activated(self, event: TabbedContent.TabActivated) -> None:
        pane = PANES.get(self.active_tab())
        if pane is not None and hasattr(pane, "on_shown") and self.query(pane):
            self.query_one(pane).on_shown()  # hidden panes are not redrawn: they catch up when shown

    def active_tab(self) -> str:
        try:
            return self.query_one(TabbedContent).active.removeprefix("tab-")
        except NoMatches:
            return ""  # shutting down

    def show_tab(self, name: str) -> None:
        self.query_one(TabbedContent).active = f"tab-{name}"

    def action_show_tab(self, name: str) -> None:
        self.show_tab(name)

    def action_focus_filter(self) -> None:
        self.query_one("#model-filter").focus()

    def action_focus_flags(self) -> None:
        for control in self.query("FlagRow Switch, FlagRow Select"):
            if not control.disabled:
                control.focus()
                return

    def action_leave_field(self) -> None:
        self.query_one(TabbedContent).query_one("Tabs").focus()

    def show_banner(self, title: str, note: str) -> None:
        """The demo's banner over the tabs."""
        banner = self.query_one("#demo-banner", Static)
        banner.update(f"[b]{title}[/]" + (f"\n{note}" if note else ""))
        banner.display = True
