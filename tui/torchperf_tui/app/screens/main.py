"""The main screen: model picker and flags on the left, the result tabs on the right. It answers the panes'
one question about the sidebar: what is selected, frozen (measure/selection.py), at the moment a job starts."""

from __future__ import annotations

import importlib

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.css.query import NoMatches
from textual.containers import Horizontal, VerticalScroll
from textual.screen import Screen
from textual.widgets import Footer, Header, Label, Static, TabbedContent, TabPane

# Below this size the screen cannot show a pane with its controls: a notice says so instead.
MIN_SIZE = (60, 18)
# Narrower than this, the sidebar starts hidden (h shows it); shorter than this, the sidebar and the panes
# draw compactly (a shorter model list, no blank line above each section, inapplicable flags as one line).
NARROW_COLUMNS = 70
SHORT_ROWS = 36

# Tab labels when the full ones do not fit (80x24 with the sidebar leaves the tab bar ~46 columns; the full
# labels need 80): every tab stays in sight, and 1-9 still switch to them.
SHORT_LABELS = {"timing": "Time", "compare": "Comp", "layers": "Layer", "device": "Dev", "memory": "Mem",
                "throughput": "Thru", "profile": "Prof", "history": "Hist", "kernels": "Kern"}
TABS = ("timing", "compare", "layers", "device", "memory", "throughput", "profile", "history", "kernels")
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
         "kernels": ("kernels", "kernels.kernels_pane", "KernelsPane")}


def pane_class(name: str):
    _, module, cls = PANES[name]
    return getattr(importlib.import_module(f"torchperf_tui.app.widgets.{module}"), cls)


class MainScreen(Screen):
    """Everything on one screen; each pane fills itself from the jobs it starts. The first frame is the
    header, the sidebar's title, a tab bar drawn as text and the footer; the panes and the real tabs are
    mounted right after it (a bare Textual app paints in ~0.4 s; 9 tabs of widgets would add a third)."""

    AUTO_FOCUS = None  # nothing to focus in the first frame: the model list takes it once mounted

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
                yield Label("Model", classes="section-title", id="picker-title")
            tabs = Text(no_wrap=True, overflow="ellipsis")
            for i, name in enumerate(TABS):
                tabs.append(f" {name.title()} ", style="bold" if i == 0 else "dim")
            yield Static(tabs, id="tabs-placeholder")
        too_small = Static("", id="too-small")
        too_small.display = False
        yield too_small
        yield Footer()

    def on_mount(self) -> None:
        self._sidebar_chosen = False  # the user pressed h: the width no longer decides
        self.call_after_refresh(self._mount_panes)

    def on_resize(self, event) -> None:
        """Fit the layout to the terminal: compact when short, the sidebar hidden when narrow (until the user
        shows it), and below MIN_SIZE a notice instead of panes that cannot be read."""
        if event.size != self.app.size:
            # Stale: a newer size is queued behind it. Textual lays the screen out at each size it is sent and
            # sends itself the size it laid out at, so two sizes queued at once (Rich's 80x25 guess under
            # TERM=dumb, then the real one, both sent while the panes mount) would alternate forever at full CPU.
            event.prevent_default()
            return
        width, height = event.size
        self.set_class(height < SHORT_ROWS, "-short")
        footer = self.query_one(Footer)
        footer.compact = width < 100
        if not self._sidebar_chosen:
            self.query_one("#sidebar").display = width >= NARROW_COLUMNS
        too_small = width < MIN_SIZE[0] or height < MIN_SIZE[1]
        notice = self.query_one("#too-small", Static)
        notice.update(f"This terminal is {width}x{height}; torchperf-tui needs at least "
                      f"{MIN_SIZE[0]}x{MIN_SIZE[1]}.\nEnlarge it, or press q to quit.")
        notice.display = too_small
        self.query_one("#body").display = not too_small
        self.call_after_refresh(self._fit_tab_labels)

    def _fit_tab_labels(self) -> None:
        """Full tab labels where they fit in the tab bar, else the short ones (and the tabs closer together)."""
        if not self.query(TabbedContent):
            return
        tabs = self.query_one(TabbedContent)
        full_width = sum(len(name) + 2 for name in TABS)
        narrow = 0 < tabs.size.width < full_width
        if narrow == tabs.has_class("-narrow"):
            return
        tabs.set_class(narrow, "-narrow")
        for name in TABS:
            tabs.get_tab(f"tab-{name}").label = SHORT_LABELS[name] if narrow else name.title()

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
        self.call_after_refresh(self._fit_tab_labels)
        # Start in the model list, not a text field: arrows browse, `/` types, and r/q/e keys work at once.
        focused = self.focused  # the scrolling sidebar or the tabs take it as they mount, not a user
        if focused is None or focused.id == "sidebar" or type(focused).__name__ in ("Tabs", "ContentTabs"):
            self.set_focus(self.query_one("#model-list"))

    def pane(self, name: str):
        """The pane called `name` in PANES."""
        return self.query_one(f"#{PANES[name][0]}")

    def panes_mounted(self) -> bool:
        """The panes mount just after the first frame, their selects a little after them."""
        return all(self.query(f"#{wid}") for wid, _, _ in PANES.values()) and \
            all(select.query("SelectCurrent") for select in self.query("Select"))

    # -- navigation ----------------------------------------------------------------------------------
    def on_tabbed_content_tab_activated(self, event: TabbedContent.TabActivated) -> None:
        name = self.active_tab()
        if name in PANES and self.query(f"#{PANES[name][0]}"):
            pane = self.pane(name)
            if hasattr(pane, "on_shown"):
                pane.on_shown()  # hidden panes are not redrawn: they catch up when shown

    def selection(self):
        """The model, input, device, flags and run options chosen now, frozen (None: no model chosen)."""
        from torchperf_tui.measure.selection import Selection

        picker = self.pane("picker")
        if picker.spec is None:
            return None
        settings = picker.settings()
        session = self.app.session
        options = self.pane("options").options
        step, _, optimizer = options["step"].partition(":")
        return Selection(spec=picker.spec, shape=settings["shape"], batch=settings["batch"], dtype=settings["dtype"],
                         channels_last=settings["channels_last"], device=session.device,
                         flags=self.pane("flags").flags, shapes=options["shapes"], compile=options["compile"],
                         warmup=session.warmup, iters=session.iters, step=step, optimizer=optimizer or "sgd",
                         amp=None if options["amp"] == "off" else options["amp"])

    def ready_selection(self, what: str, module: str = "timing"):
        """The selection for a job, or None (and a line saying why) while the engine module it needs is loading
        or missing, or no model is chosen."""
        session = self.app.session
        if not session.has(module) or self.pane("flags").flags is None:
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

    def action_focus_filter(self) -> None:
        if self.query("#model-filter"):
            self.query_one("#model-filter").focus()

    def action_focus_flags(self) -> None:
        for control in self.query("FlagRow Switch, FlagRow Select"):
            if not control.disabled:
                control.focus()
                return

    def action_toggle_sidebar(self) -> None:
        """Hide the sidebar for the tabs' full width (80 columns leave them 47), or show it again (below
        NARROW_COLUMNS it starts hidden)."""
        sidebar = self.query_one("#sidebar")
        sidebar.display = not sidebar.display
        self._sidebar_chosen = True
        self.call_after_refresh(self._fit_tab_labels)
        if not sidebar.display and self.focused is not None and sidebar in self.focused.ancestors:
            self.action_leave_field()  # the focus must not stay in what is hidden

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
