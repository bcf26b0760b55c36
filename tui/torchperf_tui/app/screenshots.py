"""Screenshots of the app (key s, and the command palette's): SVGs written beside the target and renamed over
it (engine/records/output_files.py), never over a directory, a FIFO or a link, and a failure said in one line. They go
to --screenshot-dir, else $TORCHPERF_SCREENSHOTS, else the user data directory's screenshots/ (never the
current directory, which may be a checkout); the path is announced."""

from __future__ import annotations

import os

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

    from torchperf_tui.engine.records.output_files import write_text

    name = filename or generate_datetime_filename(app.title, ".svg", time_format)
    folder = os.path.expanduser(path) if path else default_dir()
    return str(write_text(os.path.join(folder, name), app.export_screenshot()))


def deliver(app, filename: str | None, path: str | None, time_format: str | None) -> None:
    """Save and say where, or say why not."""
    from torchperf_tui.engine.errors import TorchperfError, user_message

    try:
        saved = save(app, filename, path, time_format)
    except (OSError, TorchperfError) as exc:
        app.notify(user_message(exc), title="screenshot failed", severity="error")
        return
    app.notify(f"saved to {saved}", title="screenshot", timeout=8)
