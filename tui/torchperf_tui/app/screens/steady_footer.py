"""The footer, rebuilt only when the keys it shows change.

Textual's Footer builds its keys again whenever the screen says its bindings may have changed: at every focus move,
every key that moves it, every reactive that asks for it. Here that rebuild is about twenty widgets and a layout of
the whole screen (tens of milliseconds on a 2-core box) at each Tab, ⏎ or esc, though the keys shown rarely change.
This footer remembers what it last showed (each key, its words, whether it is enabled) and
rebuilds only when that differs.
"""

from __future__ import annotations

from textual.app import ComposeResult
from textual.widgets import Footer


class SteadyFooter(Footer):
    """A Footer that skips a rebuild which would show the same keys."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.shown: tuple | None = None  # what the keys now on screen were built from (None: not built yet)

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

    def bindings_changed(self, screen) -> None:
        if self.shown is not None and screen is self.screen and self.is_attached and \
                self.keys_to_show() == self.shown:
            return  # the same keys: a rebuild would redraw them as they are, at the cost of a layout
        super().bindings_changed(screen)
