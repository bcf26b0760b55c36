"""Below the smallest size the app works at, its notice is all there is to read: no notification covers it (one
shown before the terminal shrank, or after), and a notification still in time shows again once it is large
enough."""

from __future__ import annotations

from tests.app.helpers import make_app, wait_until
from tests.fakes.fake_measurement import FakeMeasurement


def covered_cells(app, widget) -> set[str]:
    """The names of the widgets drawn over any cell of `widget`'s region (what a user sees there instead)."""
    region = widget.region
    return {type(found).__name__ for y in range(region.y, region.bottom) for x in range(region.x, region.right)
            if (found := app.screen.get_widget_at(x, y)[0]) is not widget}


def toasts_in_sight(app) -> bool:
    """A toast (Textual's Toast widget, which its package does not export) is drawn on some cell."""
    return any(type(app.screen.get_widget_at(x, y)[0]).__name__ == "Toast"
               for y in range(app.size.height) for x in range(app.size.width))


async def test_at_40x10_no_notification_covers_the_too_small_notice():
    app = make_app(measurement=FakeMeasurement())
    async with app.run_test(size=(100, 30), notifications=True) as pilot:
        app.notify("shown before the terminal shrank, long enough to wrap over several lines", timeout=60)
        await wait_until(pilot, lambda: toasts_in_sight(app), what="the first toast")
        await pilot.resize_terminal(40, 10)
        notice = app.main.query_one("#too-small")
        await wait_until(pilot, lambda: notice.display and "is 40x10;" in str(notice.render()), what="the notice")
        app.notify("shown while the terminal is too small, long enough to wrap over several lines", timeout=60)
        await pilot.pause(0.5)
        await wait_until(pilot, lambda: len(app.screen.query("Toast")) >= 2, what="both toasts mounted")
        assert covered_cells(app, notice) == set() and not toasts_in_sight(app)
        await pilot.resize_terminal(100, 30)
        await wait_until(pilot, lambda: toasts_in_sight(app), what="the toasts back once the terminal is large enough")
