"""The footer is rebuilt when the keys it shows change, and only then (app/screens/steady_footer.py)."""

from __future__ import annotations

from textual.widgets._footer import FooterKey

from tests.app.helpers import make_app, wait_ready, wait_until


def footer_keys(app) -> list[FooterKey]:
    return list(app.main.query(FooterKey))


async def test_a_focus_move_that_changes_no_key_keeps_the_footer_and_one_that_does_rebuilds_it():
    app = make_app()
    async with app.run_test(size=(110, 34)) as pilot:
        await wait_ready(pilot)
        model_list = app.main.query_one("#model-list")
        model_list.focus()
        await wait_until(pilot, lambda: [key.description for key in footer_keys(app)][:1] == ["Run"],
                         what="the footer with the app's keys")
        before = footer_keys(app)
        app.main.query_one("#compare-table").focus()  # another widget with no keys of its own in the footer
        await wait_until(pilot, lambda: app.focused is app.main.query_one("#compare-table"), what="the focus moved")
        await pilot.pause(0.3)  # a rebuild (a call after the next refresh) would have happened by now
        assert footer_keys(app) == before, "the footer was built again to show the same keys"
        # Into a text field: the letter keys type there, so the footer no longer offers them.
        app.main.query_one("#model-filter").focus()
        await wait_until(pilot, lambda: "Run" not in [key.description for key in footer_keys(app)],
                         what="the footer without the letter keys")
        model_list.focus()
        await wait_until(pilot, lambda: "Run" in [key.description for key in footer_keys(app)],
                         what="the letter keys back in the footer")
        assert all(key not in before for key in footer_keys(app))  # shown again by a rebuild


async def test_a_focus_move_into_a_text_field_rebuilds_the_footer_once(monkeypatch):
    from torchperf_tui.app.screens.steady_footer import SteadyFooter

    builds = []
    compose = SteadyFooter.compose

    def counted(self):
        builds.append(self)
        yield from compose(self)

    monkeypatch.setattr(SteadyFooter, "compose", counted)
    app = make_app()
    async with app.run_test(size=(110, 34)) as pilot:
        await wait_ready(pilot)
        app.main.query_one("#model-list").focus()
        await wait_until(pilot, lambda: "Run" in [key.description for key in footer_keys(app)],
                         what="the footer with the app's keys")
        await pilot.pause(0.3)
        builds.clear()
        app.main.query_one("#model-filter").focus()  # the focus and the field's own bindings each say so
        await wait_until(pilot, lambda: "Run" not in [key.description for key in footer_keys(app)],
                         what="the footer without the letter keys")
        await pilot.pause(0.3)  # a second rebuild (a call after the next refresh) would have happened by now
        assert len(builds) == 1, f"the footer was built {len(builds)} times for one change of its keys"
