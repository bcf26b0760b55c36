"""Textual's Select, made safe to be mounted while the app exits.

The sidebar's selects mount just after the first frame. An app told to exit in that moment (q pressed early, a
signal, a test that has seen what it waited for) prunes a select's children before the select's own mount
handler runs; Select then queries its overlay, raises NoMatches, and the app ends with a traceback and exit
code 1 (seen under load in a suite run: test_the_model_given_with_model_is_highlighted_in_the_list). The same
race as textual-plot's, handled the same way (widgets/timing/exit_safe_plot.py).
"""

from __future__ import annotations

from textual import events
from textual.widgets import Select


class ExitSafeSelect(Select):
    """A Select that skips its set-up when its children are already gone (the app is exiting)."""

    def _on_mount(self, event: events.Mount) -> None:
        if not self.children:
            event.prevent_default()  # Select's own _on_mount would query the overlay that was pruned
