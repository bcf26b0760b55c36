"""The History tab says what each row is, at 80x24 beside the sidebar as at 100x30: what its figures are per (a pass, a
token, an A/B arm's pass) and a '!' beside it on a run with a mark, and under the table the highlighted run whole (kind, time,
figures, the flags uncut, the disturbance marks), worded as `history` words it; a model's name from the file is shown
escaped, never sent to the terminal."""

from __future__ import annotations

import pytest

from tests.app.helpers import make_app, wait_until
from tests.fakes.fake_measurement import FakeMeasurement
from tests.history_kinds import B_FLAGS, DISTURBANCE, write_every_kind
from torchperf_tui.app.widgets.history.history_pane import HistoryPane

CONTROL = [chr(c) for c in (*range(0x20), 0x7F, *range(0x80, 0xA0), *range(0x202A, 0x202F), *range(0x2066, 0x206A))]


def pane_text(app) -> str:
    """What the History pane shows on the screen, line by line (the sidebar beside it cut off)."""
    pane = app.main.query_one(HistoryPane)
    left, top, width, height = pane.region
    strips = app.screen._compositor.render_strips()  # the screen as it is drawn
    return "\n".join(strip.text[left:left + width] for strip in strips[top:top + height])


def flat(text: str) -> str:
    """The text with its lines joined, as a sentence wrapped over several lines reads."""
    return " ".join(text.split())


async def history_tab(pilot, rows: int) -> str:
    """The History tab shown (key 8) once its rows are drawn: what the pane shows."""
    app = pilot.app
    for _ in range(200):
        await pilot.press("8")
        await pilot.pause(0.2)
        panes = app.main.query(HistoryPane)
        if panes and panes.first().query_one("#history-table").row_count == rows:
            break
    await wait_until(pilot, lambda: "2 bad line(s) skipped" in flat(pane_text(app)), what="the page drawn")
    return pane_text(app)


async def highlight(pilot, says: str) -> str:
    """Down the table until the line under it says `says`: what the pane shows then."""
    for _ in range(6):
        if says in flat(pane_text(pilot.app)):
            return pane_text(pilot.app)
        await pilot.press("down")
        await pilot.pause(0.2)
    await wait_until(pilot, lambda: says in flat(pane_text(pilot.app)), timeout=30, what=says)
    return pane_text(pilot.app)


@pytest.mark.parametrize("size", [(80, 24), (100, 30)])
async def test_each_history_row_says_what_it_is_and_the_highlighted_one_is_said_whole(tmp_path, size):
    path = tmp_path / "h.jsonl"
    records = write_every_kind(path)
    app = make_app(measurement=FakeMeasurement({}), history_path=str(path))
    async with app.run_test(size=size) as pilot:
        shown = await history_tab(pilot, rows=5)
        assert not any(ch in shown for ch in CONTROL if ch != "\n")  # nothing from the file drives the terminal
        lines = shown.splitlines()
        header = next(line for line in lines if " per " in line and " model " in line)
        assert "p50" in header and "p99" in header
        rows = [flat(row) for row in lines[lines.index(header) + 1:][:5]]  # newest first
        assert [row.split(" resnet18")[0].split(" evil")[0].split(" hf:")[0].split(" …")[0] for row in rows] == [
            "pass", "token", "B pass", "A pass", "! pass"]  # per what; '!': a run with a mark (the disturbed one)
        # the model is named first, its overrides cut
        assert "evil\\x1b" in rows[0] and "token hf:gpt2" in rows[1] and "12.00 ms?" in rows[1]
        assert "9.00 ms?" in rows[2] and "11.00 ms?" in rows[3] and "10.00 ms?" in rows[4]
        if size == (100, 30):
            assert "when (UTC)" in header and all("11-22 20:30" in row for row in rows)

        # under the table, the highlighted run whole: the newest first
        assert "timing, finished 2026-11-22 20:30 UTC" in flat(shown) and "evil\\x1b[2J" in flat(shown)
        said = flat(await highlight(pilot, "generation, finished 2026-11-22 20:30 UTC"))
        assert "per token p50 12.00 ms" in said and "64 new tokens after 128" in said
        said = flat(await highlight(pilot, "A/B arm B, finished 2026-11-22 20:30 UTC"))
        assert f"flags: {B_FLAGS}" in said  # the flags whole, however narrow their column
        # ... and the table keeps its header and five runs in sight however long the lines under it (a new user
        # saw one row of six): a line of ten rows at this width
        table, under = app.main.query_one("#history-table"), app.main.query_one("#history-compare")
        under.update("a long line " * 40)
        await pilot.pause(0.2)
        assert table.size.height >= 7, table.size.height
        said = flat(await highlight(pilot, f"({records['timing'].short_id})"))
        assert f"disturbed: {DISTURBANCE}" in said and "per pass p50 10.00 ms?" in said


async def test_a_record_whose_strings_look_like_markup_is_shown_as_written(tmp_path):
    """A model's name or flags from the file are words, not Textual markup: shown as written, nothing styled, no
    markup error (the table, the line under it, the comparison of two marked runs)."""
    from tests.app.test_history_pane import PaneApp
    from tests.records import make_record
    from torchperf_tui.engine.records.history_file import HistoryFile

    path = tmp_path / "h.jsonl"
    odd = make_record(12.0, model="[/]net[b]", flags={"sdpa": "[/]"})
    odd.flags_text = "[red]sdpa=[/]"
    HistoryFile(path).extend([make_record(10.0, flags={"sdpa": "math"}), odd])
    app = PaneApp(path)
    async with app.run_test(size=(120, 30)) as pilot:
        pane = app.query_one(HistoryPane)
        await wait_until(pilot, lambda: "[/]net[b]" in flat(pane_text(app)) and "flags: [red]sdpa=[/]" in flat(
            pane_text(app)), timeout=30, what="the odd name and flags shown")
        pane.toggle_mark(odd.id)
        pane.toggle_mark(next(rid for rid in pane.records if rid != odd.id))
        pane.show_marked_comparison()
        await wait_until(pilot, lambda: "flag sdpa: math -> [/]" in flat(pane_text(app)), what="the comparison")
