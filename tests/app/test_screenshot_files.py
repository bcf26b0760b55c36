"""The `s` key's SVGs: the screen as it is, not the notice of the screenshot before it, and text that reads as the
screen does in any SVG renderer."""

from __future__ import annotations

from tests.app.helpers import make_app, notifications, wait_ready, wait_until


async def test_a_screenshot_does_not_carry_the_previous_ones_notice(tmp_path):
    app = make_app(screenshot_dir=str(tmp_path))
    async with app.run_test(size=(100, 30), notifications=True) as pilot:  # toasts drawn, as in a terminal
        await wait_ready(pilot)
        await pilot.press("s")
        await wait_until(pilot, lambda: len(list(tmp_path.glob("*.svg"))) == 1, what="the first screenshot")
        first = next(tmp_path.glob("*.svg"))
        await wait_until(pilot, lambda: any(first.name in t for t in notifications(app)), what="its notice")
        await wait_until(pilot, lambda: bool(app.screen.query("Toast")), what="its notice on the screen")
        await pilot.press("s")
        await wait_until(pilot, lambda: len(list(tmp_path.glob("*.svg"))) == 2, what="the second screenshot")
        second = next(p for p in tmp_path.glob("*.svg") if p != first)
        text = second.read_text()
        assert "saved&#160;to" not in text and "saved to" not in text
        await wait_until(pilot, lambda: any(second.name in t for t in notifications(app)), what="the second notice")


async def test_a_screenshot_keeps_the_spaces_between_styled_words(tmp_path):
    """Each run of one style is a <text> element; a space that starts one (after a bold model name: 'resnet18
    3x224x224') is kept only where the SVG says its white space is to be preserved (rsvg-convert and others drop
    it otherwise, and the words run together)."""
    app = make_app(screenshot_dir=str(tmp_path))
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_ready(pilot)
        await pilot.press("s")
        await wait_until(pilot, lambda: list(tmp_path.glob("*.svg")), what="the screenshot")
        svg = next(tmp_path.glob("*.svg")).read_text()
        head = svg[svg.index("<svg"):svg.index(">", svg.index("<svg"))]
        assert 'xml:space="preserve"' in head
