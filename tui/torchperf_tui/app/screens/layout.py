"""How the main screen fits the terminal: compact when short, the sidebar hidden when narrow (until the user
shows it), short tab labels when the full ones do not fit, and below MIN_SIZE a notice instead of panes."""

from __future__ import annotations

from textual.widgets import Footer, Static, TabbedContent, Tabs

TABS = ("timing", "compare", "layers", "device", "memory", "throughput", "profile", "history", "kernels", "sweep",
        "why")
# Below this size the screen cannot show a pane with its controls: a notice says so instead.
MIN_SIZE = (60, 18)
# Narrower than this, the sidebar starts hidden (h shows it); shorter than this, the sidebar and the panes
# draw compactly (a shorter model list, no blank line above each section, inapplicable flags as one line).
NARROW_COLUMNS = 70
SHORT_ROWS = 36

# Tab labels when the full ones do not fit (80x24 with the sidebar leaves the tab bar ~47 columns: the ten short ones
# and a column between each take 46, the full ones 90): every tab stays in sight, and 1-9 still switch to them.
# Three letters (Timing's four), so that the eleven tabs stay in sight beside the sidebar at 80 columns.
SHORT_LABELS = {"timing": "Time", "compare": "Cmp", "layers": "Lay", "device": "Dev", "memory": "Mem",
                "throughput": "Thr", "profile": "Prf", "history": "Hst", "kernels": "Krn",
                "sweep": "Swp", "why": "Why"}


class FitsTerminal:
    """The main screen's layout by the terminal's size (a mixin of MainScreen: it reads `_sidebar_chosen`, which
    the screen sets when mounted, and calls `action_leave_field`)."""

    def on_resize(self, event) -> None:
        if event.size != self.app.size:
            # Stale: a newer size is queued behind it. Textual lays the screen out at each size it is sent and
            # sends itself the size it laid out at, so two sizes queued at once (Rich's 80x25 guess under
            # TERM=dumb, then the real one, both sent while the panes mount) would alternate forever at full CPU.
            event.prevent_default()
            return
        self.fit_terminal(event.size)

    def fit_terminal(self, size) -> None:
        """Fit the layout to the terminal: compact when short, the sidebar hidden when narrow (until the user
        shows it), and below MIN_SIZE a notice instead of panes that cannot be read. Called on each resize, and
        when the screen mounts with the size the app already knows: the screen's first Resize comes after the
        first frame, which was drawn in the tall layout and redrawn in the short one a few milliseconds later."""
        width, height = size
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
        self.set_class(too_small, "-too-small")  # toasts hidden meanwhile (app.tcss): they would cover the notice
        self.call_after_refresh(self._fit_tab_labels)

    def _fit_tab_labels(self) -> None:
        """Full tab labels where they fit in the tab bar, else the short ones (and the tabs closer together)."""
        if not self.query(TabbedContent):
            return
        tabs = self.query_one(TabbedContent)
        bar = tabs.query_one(Tabs)
        full_width = sum(len(name) + 2 for name in TABS)
        narrow = 0 < tabs.size.width < full_width
        if narrow == bar.has_class("-narrow"):
            return
        # On the tab bar, not on TabbedContent: a class there restyles every pane under it (0.4 s of CPU each time).
        bar.set_class(narrow, "-narrow")
        for name in TABS:
            tabs.get_tab(f"tab-{name}").label = SHORT_LABELS[name] if narrow else name.title()

    def sidebar_shown(self) -> bool:
        """Whether the sidebar takes its columns beside the tabs (h hides it)."""
        return bool(self.query_one("#sidebar").display)

    def action_toggle_sidebar(self) -> None:
        """Hide the sidebar for the tabs' full width (80 columns leave them 47), or show it again (below
        NARROW_COLUMNS it starts hidden)."""
        sidebar = self.query_one("#sidebar")
        sidebar.display = not sidebar.display
        self._sidebar_chosen = True
        self.call_after_refresh(self._fit_tab_labels)
        if not sidebar.display and self.focused is not None and sidebar in self.focused.ancestors:
            self.action_leave_field()  # the focus must not stay in what is hidden
