"""A model whose build blocks (as one stuck in C would) cannot wedge the app: choosing the next model cancels its
analysis, the measurement process is killed after the grace and started again, and the next model is analysed."""

from __future__ import annotations

import time

import pytest

from tests.app.helpers import TINY, analysed, make_app, paste, wait_ready, wait_until

pytestmark = pytest.mark.own_process  # what the app does while its measurement process is stuck or killed

BLOCKER = "tests.hostile_process_models:blocks_when_built"


async def _type_spec(pilot, spec: str) -> None:
    app = pilot.app
    await pilot.click("#custom-model")
    app.main.query_one("#custom-model").value = ""
    await paste(pilot, spec, "enter")


async def test_after_a_model_whose_build_blocks_the_next_model_is_analysed(tmp_path, monkeypatch):
    mark = tmp_path / "blocking"
    monkeypatch.setenv("TORCHPERF_TEST_MARK", str(mark))  # the blocker creates it, in the measurement process
    app = make_app(device="cpu")
    async with app.run_test(size=(110, 34)) as pilot:
        await wait_ready(pilot)
        first_pid = app.session.measurement_pid
        await _type_spec(pilot, BLOCKER)
        await wait_until(pilot, mark.exists, what="the blocker's build to start blocking")
        chosen = time.monotonic()
        await _type_spec(pilot, TINY)
        await wait_until(pilot, lambda: analysed(app, TINY), timeout=150, what="the next model's analysis")
        # Killed after the grace and started again (a few seconds of torch import), not after 15 s or never.
        assert time.monotonic() - chosen < 90
        assert app.session.measurement_pid not in (None, first_pid)
        assert app.pane("picker").model == TINY
