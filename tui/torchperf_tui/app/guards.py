"""A guard for message handlers: workers may report after the main screen is gone (the app quitting)."""

from __future__ import annotations

from textual.css.query import NoMatches


def while_running(handler):
    """Skip a worker's message that arrives after the main screen is gone (the app is shutting down)."""

    def wrapper(self, message):
        main = getattr(self, "main", self)  # the App's handlers and the main screen's alike
        if main is None or not main.is_attached or not main.children:
            return None
        try:
            return handler(self, message)
        except NoMatches:
            return None  # the panes are being torn down

    wrapper.__name__ = handler.__name__
    wrapper.__doc__ = handler.__doc__
    return wrapper
