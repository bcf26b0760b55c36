"""The footer, rebuilt only when the keys it shows change.

Textual's Footer builds its keys again whenever the screen says its bindings may have changed: at every focus move,
every key that moves it, every reactive that asks for it. Here that rebuild is about twenty widgets and a layout of
the whole screen (tens of milliseconds on a 2-core box) at each Tab, ⏎ or esc, though the keys shown rarely change.
This footer remembers what it last showed (each key, its words, whether it is enabled) and
rebuilds only when that differs. A focus move into a text field says its bindings changed twice before the rebuild
runs (a call after the next refresh): the second asks for the keys already on their way and is skipped too.
"""

from __future__ import annotations

from textual.app import ComposeResult
from textual.widgets import Footer


class SteadyFooter(Footer):
    """A Footer that skips a rebuild which would show the same keys."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.shown: tuple | None = None  # what the keys now on screen were built from (None: not built yet)
        self.coming: tuple | None = None  # what a rebuild asked for and not yet run will show (None: none asked)

    def keys_to_show(self) -> tuple:
        """Everything the footer's keys are built from, as Footer.compose reads it: each binding it would show, with
        its key's display, words, tooltip, group and whether it is enabled; the palette's key. (The compact style is
        not among them: the keys follow it by themselves.)"""
        bindings = self.screen.active_bindings
        keys = tuple((binding.key, self.app.get_key_display(binding), binding.description, binding.action,
                      binding.group, enabled, tooltip)
                     for _, binding, enabled, tooltip in bindings.values() if binding.show)
        palette = bindings.get(self.app.COMMAND_PALETTE_BINDING) if self.show_command_palette else None
        palette_key = None if palette is None else (palette[1].key, palette[2], palette[3])
        return keys, palette_key

    def compose(self) -> ComposeResult:
        built = 0
        for widget in super().compose():
            built += 1
            yield widget
        self.shown = self.keys_to_show() if built else None  # nothing built: the bindings were not ready
        self.coming = None

    def bindings_changed(self, screen) -> None:
        if self.shown is None or screen is not self.screen or not self.is_attached:
            super().bindings_changed(screen)
            return
        keys = self.keys_to_show()
        if keys == (self.shown if self.coming is None else self.coming):
            return  # the keys on screen, or those a rebuild on its way will show: another would redraw the same
        if self.app.app_focus:  # Footer rebuilds only while the app has the focus
            self.coming = keys
        super().bindings_changed(screen)
