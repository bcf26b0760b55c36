"""The app tests' fixtures: "app ready, a tiny model chosen", instead of each test repeating it; every
notification an app shows is recorded; the apps of a test share the worker's warm measurement process unless the
test is marked `own_process` (tests/fakes/shared_measurement.py)."""

from __future__ import annotations

import contextlib

import pytest

from tests.app import helpers
from tests.app.helpers import TINY, choose_model, make_app, recording_notify, wait_ready
from tests.fakes.shared_measurement import SharedMeasurement

OWN_PROCESS = "own_process"  # the mark (tests/conftest.py)

@pytest.fixture(scope="session")
def _shared_measurement():
    """The worker's one warm measurement process, started by the first app that asks for it, stopped at the end."""
    shared = SharedMeasurement()
    yield shared
    shared.close()


@pytest.fixture(autouse=True)
def _measurement_process(request, _shared_measurement):
    """This test's apps get the shared measurement process, or (marked own_process) a process each."""
    own = request.node.get_closest_marker(OWN_PROCESS) is not None
    helpers.REAL_PROCESS["shared"] = None if own else _shared_measurement
    yield
    helpers.REAL_PROCESS["shared"] = None


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
