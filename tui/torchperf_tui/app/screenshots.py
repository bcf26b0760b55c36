"""Screenshots of the app (key s, and the command palette's): SVGs written beside the target and renamed over
it (core/output_files.py), never over a directory, a FIFO or a link, and a failure said in one line. They go
to --screenshot-dir, else $TORCHPERF_SCREENSHOTS, else the user data directory's screenshots/ (never the
current directory, which may be a checkout); the path is announced.

A screenshot is the screen, not its notices: the ones on screen (the last screenshot's "saved to" among them) are
cleared and the screen drawn again before it is taken. Its root element says that white space is preserved: each run
of one style is a <text> element of its own, and a renderer that trims the leading space of one (rsvg-convert does)
would run a bold name into the words after it ('resnet183x224x224')."""

from __future__ import annotations

import os

from torchperf_tui.core.errors import TorchperfError, user_message
from torchperf_tui.core.output_files import write_text

SCREENSHOTS_ENV = "TORCHPERF_SCREENSHOTS"


def default_dir() -> str:
    """$TORCHPERF_SCREENSHOTS, else <user data directory>/screenshots, created if missing."""
    env = os.environ.get(SCREENSHOTS_ENV, "").strip()
    if env:
        return os.path.expanduser(env)
    import platformdirs

    folder = os.path.join(platformdirs.user_data_dir("torchperf-tui"), "screenshots")
    os.makedirs(folder, exist_ok=True)
    return folder


def save(app, filename: str | None, path: str | None, time_format: str | None) -> str:
    """Write the screen as an SVG; returns where. Raises OSError or TorchperfError."""
    from textual._files import generate_datetime_filename

    name = filename or generate_datetime_filename(app.title, ".svg", time_format)
    folder = os.path.expanduser(path) if path else default_dir()
    return str(write_text(os.path.join(folder, name), preserve_spaces(app.export_screenshot())))


def preserve_spaces(svg: str) -> str:
    """The SVG with xml:space="preserve" on its root element (Rich's export does not say it)."""
    if 'xml:space="preserve"' in svg[:svg.find(">", svg.find("<svg")) + 1]:
        return svg
    return svg.replace("<svg ", '<svg xml:space="preserve" ', 1)


# Screen refreshes to wait for the toasts to leave (Textual removes them over a few turns of its loop): past this the
# screenshot is taken as the screen is.
TOAST_WAIT_REFRESHES = 20


def deliver(app, filename: str | None, path: str | None, time_format: str | None) -> None:
    """Clear the notices on screen, then, once the screen is drawn without them, save and say where (or why not)."""
    app.clear_notifications()  # Textual takes the toasts away on its next turns: the save waits for the redraw
    app.call_after_refresh(save_when_clear, app, filename, path, time_format, TOAST_WAIT_REFRESHES)


def save_when_clear(app, filename: str | None, path: str | None, time_format: str | None, refreshes: int) -> None:
    """Save once no toast is left on the screen and the screen has been drawn since (or `refreshes` ran out)."""
    if refreshes > 0 and app.screen.query("Toast"):
        app.call_after_refresh(save_when_clear, app, filename, path, time_format, refreshes - 1)
    elif refreshes > 0:
        app.call_after_refresh(save_when_clear, app, filename, path, time_format, 0)
    else:
        save_and_say(app, filename, path, time_format)


def save_and_say(app, filename: str | None, path: str | None, time_format: str | None) -> None:
    try:
        saved = save(app, filename, path, time_format)
    except (OSError, TorchperfError) as exc:
        app.notify(user_message(exc), title="screenshot failed", severity="error")
        return
    app.notify(f"saved to {saved}", title="screenshot", timeout=8)
