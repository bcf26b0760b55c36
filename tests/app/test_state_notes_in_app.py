"""In the app: a run whose model's factory set torch's thread count says so under its numbers, its line says
the thread count it ran on, and Compare does not call two such runs "same flags"."""

from __future__ import annotations

import re

from tests.app.helpers import screen_text, wait_until

HOSTILE = "tests.state_changing_models:factory_sets_threads"


async def test_a_run_whose_factory_set_threads_says_so_and_compare_does_not_call_it_the_same(tiny_app):
    async with tiny_app(spec=HOSTILE, size=(110, 34), warmup=1, iters=10) as pilot:
        app = pilot.app
        for run_id in (1, 2):
            await pilot.press("r")
            await wait_until(pilot, lambda: app.session.runs.get(run_id) is not None
                             and app.session.runs.get(run_id).finished, what=f"run {run_id}")
        assert app.session.runs.get(2).status == "done"
        stats = " ".join(screen_text(app, "#run-stats").split())
        assert "torch state: the model's code (import or factory) set torch threads to" in stats
        status = screen_text(app, "#run-status")
        assert re.search(r"threads=\d+ \(default\)", status), status
        await pilot.press("2")
        await wait_until(pilot, lambda: app.main.query_one("#compare-table").row_count == 2, what="the table")
        table = app.main.query_one("#compare-table")
        columns = [str(c.label) for c in table.columns.values()]
        setup = " ".join(str(table.get_row("2")[columns.index("setup vs baseline")]).split("\n"))  # wrapped or not
        assert setup != "same flags" and "torch state changed by the model's code in #2 and #1" in setup, setup
