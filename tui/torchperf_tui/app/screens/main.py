"""The main screen: model picker and flags on the left, the result tabs on the right."""

from __future__ import annotations

from textual.app import ComposeResult
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


class MainScreen(Screen):
    """Everything on one screen; the app fills the panes as the engine reports."""

    # Start in the model list, not a text field: arrows browse, `/` types, and r/q/e keys work at once.
    AUTO_FOCUS = "#model-list"

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
