"""The timing modes in the Timing tab (key M): the chosen model in sync, pipelined and graph mode side by side,
in the measurement process, the line naming what was measured, the gaps in words, gone with another model."""

from __future__ import annotations

from tests.app.helpers import TINY, choose_model, screen_text, wait_until


async def test_m_measures_the_timing_modes_and_says_what_the_gaps_mean(tiny_app):
    async with tiny_app(size=(120, 40), warmup=1, iters=6) as pilot:
        app = pilot.app
        await pilot.press("3")  # pressed on another tab, M shows the Timing tab, where its lines are
        await pilot.press("M")
        assert app.main.active_tab() == "timing"
        await wait_until(pilot, lambda: app.pane("timing").last_modes is not None, what="the timing modes")
        text = screen_text(app, "#run-modes")
        assert text.startswith(f"timing modes of {TINY} 1x3x32x32 float32 · infer · ")
        assert "sync p50 " in text and "pipelined p50 " in text and "(blocks of 10)" in text and "graph n/a" in text
        assert "sync and pipelined" in text or "pipelin" in text.split("\n", 2)[2]  # a gap said in words
        result = app.pane("timing").last_modes
        assert result.mode("sync").stats.n == 6 and "GPU-only" in result.mode("graph").unavailable
        assert "graph: CUDA graphs are GPU-only" in app.main.query_one("#run-modes").tooltip
        await choose_model(pilot, "tests.tinymodels:threads_probe", "3x32x32")
        assert screen_text(app, "#run-modes") == ""  # they were another model's


async def test_at_80x24_the_modes_are_short_and_whole_and_a_varying_shape_is_refused_in_words(tiny_app):
    async with tiny_app(size=(80, 24), warmup=1, iters=4) as pilot:
        app = pilot.app
        await pilot.press("M")
        await wait_until(pilot, lambda: app.pane("timing").last_modes is not None, what="the timing modes")
        widget = app.main.query_one("#run-modes")
        text = screen_text(app, "#run-modes")  # the medians and the first gap, wrapped at the tab's edge, not cut
        assert text.startswith("modes sync p50 ") and len(text.split("\n")) == 2
        await wait_until(pilot, lambda: "".join(text.split()) == "".join(
            "".join(widget.render_line(y).text.split()) for y in range(widget.size.height)), what="the lines whole")
        app.main.query_one("#option-shapes").value = "cycle:4"
        await pilot.pause()
        await pilot.press("M")
        await wait_until(pilot, lambda: "error" in screen_text(app, "#run-modes"), what="the refusal")
        assert "fixed shape" in widget.tooltip
        # Out of the compact layout, the refusal stays: the last result's lines do not come back over it.
        await pilot.resize_terminal(120, 40)
        await wait_until(pilot, lambda: not app.pane("timing").has_class("-compact"), what="the full layout")
        await pilot.pause()
        assert "error" in screen_text(app, "#run-modes") and "fixed shape" in widget.tooltip
