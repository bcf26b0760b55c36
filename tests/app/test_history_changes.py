"""History's v: the change points of the highlighted run's set-up, read from the whole history file (not only the
page shown), in `history --changes`'s words; none in a set-up whose runs only wander; v again hides them."""

from __future__ import annotations

from tests.app.helpers import screen_text, wait_until
from tests.app.test_history_pane import PaneApp
from tests.engine.test_change_points import noisy_medians, records_of
from tests.records import ENV
from torchperf_tui.app.widgets.history.history_pane import HistoryPane
from torchperf_tui.engine.records.history_file import HistoryFile


async def test_v_shows_the_change_points_of_the_highlighted_runs_set_up_and_v_again_hides_them(tmp_path,
                                                                                                 monkeypatch):
    def env_at(i):
        return {**ENV, "torch": "2.14.1" if i < 20 else "2.15.0"}

    stepped = records_of(noisy_medians([(10.0, 20), (13.0, 20)], seed=5), env_at=env_at)
    stationary = records_of(noisy_medians([(20.0, 40)], seed=6), dtype="float16")
    path = tmp_path / "h.jsonl"
    HistoryFile(path).extend(stepped + stationary)
    # the page holds 10 of the stepped set-up's 40 runs: the series is read whole
    monkeypatch.setattr(HistoryPane, "PAGE_SIZE", 50)
    app = PaneApp(path)
    async with app.run_test(size=(160, 40)) as pilot:
        pane = app.query_one(HistoryPane)
        await wait_until(pilot, lambda: len(app.loaded) == 1, what="the first page")
        changes = pane.query_one("#history-changes")
        assert not changes.display
        table = pane.query_one("#history-table")
        table.move_cursor(row=table.get_row_index(stepped[-1].id))
        await pilot.press("v")
        await wait_until(pilot, lambda: "from " in screen_text(app, "#history-changes"),
                         what="the change points", shown=lambda: screen_text(app, "#history-changes"))
        lines = screen_text(app, "#history-changes").splitlines()
        assert lines[0].startswith("resnet18 1x3x224x224 float32 [defaults] on cuda NVIDIA H100 80GB HBM3: "
                                   "40 records")
        assert lines[1].startswith(f"  from {stepped[20].short_id} (") and "+30.0 % (95 % CI +" in lines[1]
        assert lines[1].endswith("coinciding: torch 2.14.1 -> 2.15.0") and len(lines) == 2

        table.move_cursor(row=table.get_row_index(stationary[-1].id))
        await pilot.press("v")
        await wait_until(pilot, lambda: "no change point" in screen_text(app, "#history-changes"),
                         what="the other set-up's", shown=lambda: screen_text(app, "#history-changes"))
        assert screen_text(app, "#history-changes").splitlines()[1] == "  no change point in 40 records"
        await pilot.press("v")
        await wait_until(pilot, lambda: not changes.display, what="the change points hidden")
