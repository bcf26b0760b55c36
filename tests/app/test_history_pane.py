"""The History tab pages through the history file: at most a page of runs is held and shown, newest first; ]
and [ go to older and newer pages, read from the end of the file; marks hold across pages."""

from __future__ import annotations

import contextlib
import json

from textual.app import App, ComposeResult
from textual.widgets import Footer

from tests.app.helpers import make_app, row_cells, screen_text, wait_ready, wait_until
from tests.records import make_record
from torchperf_tui.app.widgets.history.history_pane import HistoryPane
from torchperf_tui.engine.records.history_file import HistoryFile


def write_history(path, n: int) -> list:
    """n runs, oldest first, their p50 1, 2, 3 ... ms so that a row tells which run it is."""
    records = [make_record(p50=float(i + 1), p99=float(i + 2)) for i in range(n)]
    HistoryFile(path).extend(records)
    return records


def shown_ids(pane: HistoryPane) -> list[str]:
    table = pane.query_one("#history-table")
    return [row_cells(table, i)["id"] for i in range(table.row_count)]


def short(records) -> list[str]:
    return [r.short_id for r in records]


async def two_runs_compared(path, first, second, says: str) -> tuple[dict[str, str], str]:
    """`first` and `second` written to the history at `path`, shown, both marked and compared, as a user marks
    them: ({short id: its flags cell}, the comparison's text once it says `says`)."""
    HistoryFile(path).extend([first, second])
    app = PaneApp(path)
    async with app.run_test(size=(160, 30)) as pilot:
        pane = app.query_one(HistoryPane)
        await wait_until(pilot, lambda: len(shown_ids(pane)) == 2, what="the two runs")
        table = pane.query_one("#history-table")
        flags = {row_cells(table, i)["id"]: row_cells(table, i)["flags"] for i in range(2)}
        pane.toggle_mark(first.id)
        pane.toggle_mark(second.id)
        pane.show_marked_comparison()
        await wait_until(pilot, lambda: says in screen_text(app, "#history-compare"), what="the comparison")
        return flags, screen_text(app, "#history-compare")


class PaneApp(App):
    """The pane alone, fed as the app feeds it, keeping the pages it reports."""

    def __init__(self, path) -> None:
        super().__init__()
        self.path = path
        self.loaded: list = []

    @property
    def main(self):  # where tests.app.helpers looks for widgets, as on TorchperfApp
        return self.screen

    def compose(self) -> ComposeResult:
        yield HistoryPane(id="history")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#history-table").focus()
        self.query_one(HistoryPane).show_history(self.path)

    def on_history_pane_loaded(self, message: HistoryPane.Loaded) -> None:
        self.loaded.append(message.loaded)


@contextlib.asynccontextmanager
async def first_page(tmp_path, n: int):
    """`n` runs written to a history file and the pane shown on it, once its first page has loaded:
    (the file's path, the runs, the app, its pilot, the pane)."""
    path = tmp_path / "h.jsonl"
    records = write_history(path, n)
    app = PaneApp(path)
    async with app.run_test(size=(120, 30)) as pilot:
        pane = app.query_one(HistoryPane)
        await wait_until(pilot, lambda: len(app.loaded) == 1, what="the first page")
        yield path, records, app, pilot, pane


async def test_the_pane_reads_a_page_at_a_time_from_the_end_and_pages_with_brackets(tmp_path):
    async with first_page(tmp_path, 450) as (path, records, app, pilot, pane):
        newest = records[-200:][::-1]
        assert shown_ids(pane) == short(newest) and list(pane.records) == [r.id for r in newest]
        assert app.loaded[0].records == records[-200:]  # read from the end: only the page
        note = screen_text(app, "#history-note")
        assert "the newest 200 runs" in note and "] older" in note and "[ newer" not in note

        await pilot.press("right_square_bracket")
        await wait_until(pilot, lambda: len(app.loaded) == 2, what="the older page")
        assert shown_ids(pane) == short(records[-400:-200][::-1]) and len(pane.records) == 200
        note = screen_text(app, "#history-note")
        assert "runs 201–400 counting back from the newest" in note and "[ newer · ] older" in note

        await pilot.press("right_square_bracket")
        await wait_until(pilot, lambda: len(app.loaded) == 3, what="the oldest page")
        assert shown_ids(pane) == short(records[:50][::-1])
        assert "runs 401–450" in screen_text(app, "#history-note") and "] older" not in screen_text(
            app, "#history-note")
        await pilot.press("right_square_bracket")  # nothing older: stays
        await pilot.pause(0.2)
        assert len(app.loaded) == 3 and shown_ids(pane) == short(records[:50][::-1])

        await pilot.press("left_square_bracket", "left_square_bracket")
        await wait_until(pilot, lambda: shown_ids(pane) == short(newest), what="back to the newest page")


async def test_a_new_run_shows_on_the_newest_page_and_an_older_page_stays_put(tmp_path):
    async with first_page(tmp_path, 250) as (path, records, app, pilot, pane):
        added = make_record(p50=999.0)
        HistoryFile(path).append(added)
        pane.show_history(path)
        await wait_until(pilot, lambda: len(app.loaded) == 2, what="the refresh")
        assert shown_ids(pane)[0] == added.short_id and len(pane.records) == 200
        await pilot.press("right_square_bracket")
        await wait_until(pilot, lambda: len(app.loaded) == 3, what="the older page")
        HistoryFile(path).append(make_record())
        pane.show_history(path)
        await wait_until(pilot, lambda: len(app.loaded) == 4, what="the refresh of the older page")
        assert shown_ids(pane) == short(records[:51][::-1])


async def test_runs_marked_on_two_pages_compare_older_first(tmp_path):
    async with first_page(tmp_path, 300) as (path, records, app, pilot, pane):
        pane.mark()  # the newest run, on the first page
        # of the two a comparison takes, not "1 of 2" beside the 300 runs listed
        assert str(pane.query_one("#history-compare").render()) == "1 of the 2 runs to compare marked (m or ⏎)"
        await pilot.press("right_square_bracket")
        await wait_until(pilot, lambda: len(app.loaded) == 2, what="the older page")
        pane.toggle_mark()  # the newest run of the older page
        assert pane.marked_pair() == (records[-201], records[-1])
        await pilot.press("left_square_bracket")
        await wait_until(pilot, lambda: len(app.loaded) == 3, what="back to the newest page")
        assert pane.marked_pair() == (records[-201], records[-1])
        assert row_cells(pane.query_one("#history-table"), 0)["mark"] == "●"


async def test_a_history_that_is_not_a_file_is_an_error_line(tmp_path):
    app = PaneApp(tmp_path)  # a folder
    async with app.run_test(size=(120, 30)) as pilot:
        await wait_until(pilot, lambda: "error" in screen_text(app, "#history-note"), what="the error")
        assert "is a directory, not a regular file" in screen_text(app, "#history-note")


async def test_bad_lines_are_counted_on_the_page_and_reported_once(tmp_path):
    path = tmp_path / "h.jsonl"
    good = make_record()
    path.write_bytes(b"\xff\xfe\n" * 500 + json.dumps(good.to_dict()).encode() + b"\n")
    app = PaneApp(path)
    async with app.run_test(size=(120, 30)) as pilot:
        await wait_until(pilot, lambda: len(app.loaded) == 1, what="the page")
        assert "1 run(s)" in screen_text(app, "#history-note")
        assert "500 bad line(s) skipped" in screen_text(app, "#history-note")
        assert len(app.loaded[0].warnings) == 1 and "skipped 500 bad lines" in app.loaded[0].warnings[0]


async def test_the_app_history_tab_shows_a_page_of_a_long_history(tmp_path):
    path = tmp_path / "runs.jsonl"
    records = write_history(path, 230)
    app = make_app(history_path=str(path))
    async with app.run_test(size=(120, 32)) as pilot:
        await wait_ready(pilot)
        await pilot.press("8")
        pane = app.main.query_one(HistoryPane)
        await wait_until(pilot, lambda: pane.query_one("#history-table").row_count > 0, what="the history")
        assert shown_ids(pane) == short(records[-200:][::-1]) and len(pane.records) == 200
        await pilot.press("right_square_bracket")
        await wait_until(pilot, lambda: shown_ids(pane) == short(records[:30][::-1]), what="the older page")


async def test_a_run_whose_gpu_throttled_is_marked_in_its_row_and_in_a_comparison(tmp_path):
    from tests.records import ENV

    path = tmp_path / "h.jsonl"
    hot_env = {**ENV, "gpu_throttled": True, "gpu_throttled_share": 0.4, "gpu_throttle_reasons": "power cap (software)"}
    cool, hot = make_record(p50=10.0), make_record(p50=12.0, env=hot_env)
    flags, comparison = await two_runs_compared(path, cool, hot, says="GPU throttled")
    assert flags[hot.short_id].endswith("(GPU throttled)") and "throttled" not in flags[cool.short_id]
    assert "GPU throttled 40 %: power cap (software)" in comparison


async def test_the_marks_of_the_table_are_said_under_it_where_it_shows_them(tmp_path):
    # A new user at 80x24 saw '!' and '?' in the table and nothing saying what they mean (a tooltip, out of reach
    # of the keyboard).
    from tests.records import ENV

    path = tmp_path / "h.jsonl"
    hot_env = {**ENV, "gpu_throttled": True, "gpu_throttled_share": 0.4, "gpu_throttle_reasons": "power cap (software)"}
    HistoryFile(path).extend([make_record(p50=10.0)])
    app = PaneApp(path)
    async with app.run_test(size=(120, 30)) as pilot:
        pane = app.query_one(HistoryPane)
        await wait_until(pilot, lambda: len(app.loaded) == 1, what="the first page")
        legend = pane.query_one("#history-legend")
        table = pane.query_one("#history-table")
        marked = any("!" in row_cells(table, i)["mark"] or "?" in row_cells(table, i)["p99"]
                     for i in range(table.row_count))
        assert legend.display == marked
        HistoryFile(path).extend([make_record(p50=12.0, env=hot_env)])
        pane.show_history(path)
        await wait_until(pilot, lambda: len(app.loaded) == 2, what="the page again")
        await wait_until(pilot, lambda: legend.display and "! = the run's figures have a mark" in screen_text(
            app, "#history-legend"), what="the legend of '!'")
        assert ["!" in row_cells(table, i)["mark"] for i in range(table.row_count)] == [True, False]


async def test_p99_stays_in_sight_when_the_panes_scrollbar_shows_after_the_table_is_filled(tmp_path):
    # CI at 80x24: the table was fitted to the pane's width, then the highlighted run's long lines gave the pane
    # its scrollbar, the table lost two columns and p99 was cut ('147 m').
    from tests.app.helpers import column_in_sight
    from tests.records import ENV

    path = tmp_path / "h.jsonl"
    hot_env = {**ENV, "gpu_throttled": True, "gpu_throttled_share": 0.4, "gpu_throttle_reasons": "power cap (software)"}
    long_model = "my_company.vision.backbones.experimental:build_a_rather_long_named_model"
    HistoryFile(path).extend([make_record(p50=10.0, model=long_model), make_record(p50=147.0, p99=151.25,
                                                                                   model=long_model, env=hot_env)])
    app = PaneApp(path)
    async with app.run_test(size=(46, 16)) as pilot:
        pane = app.query_one(HistoryPane)
        table = pane.query_one("#history-table")
        await wait_until(pilot, lambda: len(app.loaded) == 1 and table.row_count == 2, what="the two runs")
        await wait_until(pilot, lambda: pane.show_vertical_scrollbar, what="the pane's scrollbar")
        await wait_until(pilot, lambda: column_in_sight(table, "p99"), what="p99 in sight beside the scrollbar")
        assert table.columns[next(k for k in table.columns if k.value == "model")].get_render_width(table) > 8 + 2


async def test_runs_shown_while_the_tab_is_hidden_are_fitted_to_the_tables_width_once_it_is_in_view(tmp_path):
    # Under load a page arrived as the History tab came into view, before it was laid out: the table had no width
    # then, the model was cut to its least, and Textual did not call the tab's coming back at its old width a resize.
    from textual.widgets import Static, TabbedContent, TabPane

    long_model = "my_company.vision.backbones:build_model"
    path = tmp_path / "h.jsonl"
    HistoryFile(path).extend([make_record(model=long_model)])

    class TabsApp(App):
        def compose(self) -> ComposeResult:
            with TabbedContent(initial="history-tab"):
                with TabPane("History", id="history-tab"):
                    yield HistoryPane(id="history")
                with TabPane("Other", id="other-tab"):
                    yield Static("another pane")

    app = TabsApp()
    async with app.run_test(size=(120, 30)) as pilot:
        pane, tabs = app.query_one(HistoryPane), app.query_one(TabbedContent)
        table = pane.query_one("#history-table")
        await wait_until(pilot, lambda: table.size.width > 0, what="the History tab laid out")
        tabs.active = "other-tab"
        await wait_until(pilot, lambda: table.size.width == 0, what="the History tab hidden")
        pane.show_records(HistoryFile(path).load())
        tabs.active = "history-tab"
        await wait_until(pilot, lambda: table.row_count == 1 and row_cells(table, 0)["model"] == long_model,
                         what="the model's name whole")
