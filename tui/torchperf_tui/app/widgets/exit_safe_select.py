"""Textual's Select, made safe to be mounted while the app exits.

The sidebar's selects mount just after the first frame. An app told to exit in that moment (q pressed early, a
signal, a test that has seen what it waited for) prunes a select's children before the select's own mount
handler runs; Select then queries its overlay, raises NoMatches, and the app ends with a traceback and exit
code 1 (seen under load in a suite run: test_the_model_given_with_model_is_highlighted_in_the_list). The prune can
also come one level down: the select's current-value bar is there but its label is gone, and Select's set-up of its
value raises the same way (a burner run: test_a_store_that_cannot_be_used_is_one_error_and_the_app_runs_on). The same
race as textual-plot's, handled the same way (widgets/timing/exit_safe_plot.py).
"""

from __future__ import annotations

from textual import events
from textual.widgets import Select


class ExitSafeSelect(Select):
    """A Select that skips its set-up when its parts are already gone (the app is exiting)."""

    def _on_mount(self, event: events.Mount) -> None:
        # Select's own _on_mount queries its overlay and sets its value into the current-value bar's label: when
        # either was pruned, there is nothing to set up
        if not self.query("SelectOverlay") or not self.query("SelectCurrent #label"):
            event.prevent_default()
