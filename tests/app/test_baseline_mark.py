"""History's baseline mark as a user sets it: b on a highlighted record marks it (said on screen, B in its row),
the next timing run is shown against it in Timing in the gate's words (ratio, interval, verdict, differences),
b again unmarks it; a record that cannot be a baseline says why."""

from __future__ import annotations

import dataclasses

from tests.app.helpers import TINY, first_recorded_run, make_app, notifications, row_cells, screen_text, wait_ready, wait_until
from tests.records import make_record
from torchperf_tui.app.widgets.history.baseline_mark import CONDITION_MARK
from torchperf_tui.engine.records.history_file import HistoryFile


def history_table(app):
    return app.main.query_one("#history-table")


def chosen_marks(table, row: int) -> str:
    """The mark column's ● and B of a row, without its '!' (a run disturbed, as a real run on a busy box is)."""
    return row_cells(table, row)["mark"].replace(CONDITION_MARK, "")


async def test_b_marks_the_baseline_and_the_next_run_is_shown_against_it(tmp_path, tiny_app):
    path = tmp_path / "runs.jsonl"
    async with tiny_app(size=(120, 40), warmup=1, iters=20, history_path=str(path)) as pilot:
        app = pilot.app
        first = await first_recorded_run(pilot, path)
        await pilot.press("8")
        await wait_until(pilot, lambda: history_table(app).row_count == 1, what="the run in History")
        await pilot.press("b")
        await wait_until(pilot, lambda: chosen_marks(history_table(app), 0) == "B", what="the B mark")
        assert any(first.short_id in text and "b again unmarks it" in text for text in notifications(app))
        line = app.main.query_one("#run-baseline")
        assert line.display and f"baseline {first.short_id}" in screen_text(app, "#run-baseline")

        await pilot.press("1", "r")
        await wait_until(pilot, lambda: "against the baseline" in screen_text(app, "#run-baseline"),
                         what="the run against the baseline")
        text = screen_text(app, "#run-baseline")
        assert f"in baseline {first.short_id} (marked in History): ratio " in text and "95 % CI" in text
        assert any(word in text for word in ("slower: ", "faster: ", "the same within noise: "))
        assert "gate: " in text and "differences: none" in text and "environment: " in text

        await pilot.press("8")
        await wait_until(pilot, lambda: history_table(app).row_count == 2, what="both runs in History")
        history_table(app).move_cursor(row=1)  # the first run (newest first): the baseline's row
        await pilot.press("b")
        await wait_until(pilot, lambda: not line.display, what="the baseline unmarked")
        assert [chosen_marks(history_table(app), i) for i in range(2)] == ["", ""]


async def test_a_record_that_cannot_be_a_baseline_says_why_and_marks_nothing(tmp_path):
    path = tmp_path / "runs.jsonl"
    HistoryFile(path).append(dataclasses.replace(make_record(), samples_ms=[], model=TINY))
    app = make_app(history_path=str(path))
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_ready(pilot)
        await pilot.press("8")
        await wait_until(pilot, lambda: history_table(app).row_count == 1, what="the record")
        await pilot.press("b")
        await wait_until(pilot, lambda: any("a gate needs at least 5" in t for t in notifications(app)),
                         what="the refusal")
        assert chosen_marks(history_table(app), 0) == "" and not app.main.query_one("#run-baseline").display
