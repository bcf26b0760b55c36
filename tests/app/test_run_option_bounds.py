"""The run options' iterations and warm-up have the CLI's bounds (options.iters and options.warmup, one check for
both): a count past them is refused in one line and the field shows the value in use again."""

from __future__ import annotations

import pytest
from textual.widgets import Input

from tests.app.helpers import notifications, wait_until
from torchperf_tui.core import options


@pytest.mark.parametrize("field_id, typed, message", [
    ("#option-iters", str(options.ITERS_MAX + 1), f"iters: must be at most {options.ITERS_MAX}"),
    ("#option-iters", "20000000", f"iters: must be at most {options.ITERS_MAX}"),
    ("#option-warmup", "1000000", f"warm-up: expected a count 0-{options.WARMUP_MAX:,} or 'auto'"),
])
async def test_a_count_past_the_clis_bound_is_refused_in_the_app_too(tiny_app, field_id, typed, message):
    async with tiny_app(size=(100, 30), warmup=3, iters=20) as pilot:
        app = pilot.app
        field = app.main.query_one(field_id, Input)
        before = field.value
        field.focus()
        field.value = ""
        await pilot.press(*typed, "enter")
        await wait_until(pilot, lambda: field.value == before, what="the value in use back in the field")
        assert (app.session.iters, app.session.warmup) == (20, 3)
        assert any(message in line for line in notifications(app)), notifications(app)
