"""textual-plot's PlotWidget, made safe to be mounted while the app exits.

The plots are mounted once textual-plot has been imported, behind the first frame. An app told to exit in that
moment (SIGHUP from a dropped SSH session, SIGTERM, `q` pressed early) prunes the plot's children before the
plot's mount handlers run; the library's margin watchers and on_mount then query its Grid and legend, raise
NoMatches, and the app ends with a traceback and exit code 1 instead of 128 + the signal. Imported only where
textual-plot is.
"""

from __future__ import annotations

from textual import events
from textual.containers import Grid
from textual_plot import PlotWidget


class ExitSafePlot(PlotWidget):
    """A PlotWidget that skips its set-up when its children are already gone (the app is exiting)."""

    def _children_pruned(self) -> bool:
        return not self.query(Grid)

    def on_mount(self, event: events.Mount) -> None:
        if self._children_pruned():
            event.prevent_default()  # the library's on_mount would query the children that were pruned

    def on_resize(self) -> None:
        """textual-plot sizes its canvases to the widget only on a layout refresh of the widget: a new size asks
        for one (a caption or edge note shown or hidden beside it, a resize), so a redraw at the same size need not."""
        if not self._children_pruned():
            self.refresh(layout=True)

    def _update_margin_sizes(self) -> None:
        # The margins' watchers run at mount too; the library's update sets its Grid's rows and columns.
        if not self._children_pruned():
            super()._update_margin_sizes()
