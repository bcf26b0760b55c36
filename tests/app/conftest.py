"""The app tests' fixtures: "app ready, a tiny model chosen", instead of each test repeating it; every
notification an app shows is recorded."""

from __future__ import annotations

import contextlib

import pytest

from tests.app.helpers import TINY, choose_model, make_app, recording_notify, wait_ready


@pytest.fixture(autouse=True)
def _record_notifications(monkeypatch):
    """Every app in these tests keeps the notifications it shows (helpers.notifications reads them): a toast
    can expire before a test on a busy box looks for it."""
    from textual.app import App

    monkeypatch.setattr(App, "notify", recording_notify(App.notify))


@contextlib.asynccontextmanager
async def ready_app(spec: str = TINY, shape: str = "3x32x32", size: tuple[int, int] = (110, 34), **options):
    """make_app(**options) under Pilot, the engine loaded, the device probed and the flag switches built, `spec`
    chosen at `shape` as a user types them and its analysis done."""
    app = make_app(**options)
    async with app.run_test(size=size) as pilot:
        await wait_ready(pilot)
        await choose_model(pilot, spec, shape)
        yield pilot


@pytest.fixture
def tiny_app():
    """`async with tiny_app(**options) as pilot:` gives the app ready with the tiny model chosen (ready_app). The
    app runs inside the test's own `async with`, so that Textual's context stays the test's."""
    return ready_app
