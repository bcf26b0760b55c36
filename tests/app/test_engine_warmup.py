"""The UI's engine modules are imported once, off the UI thread (Session.load_engine); code then uses them by
plain imports. A module that fails to import disables what needs it, with its reason, not the app."""

from __future__ import annotations

from tests.app.helpers import TINY, choose_model, flip, make_app, notifications, wait_ready, wait_until
from torchperf_tui.app import session as session_module
from torchperf_tui.app.session import Session


def test_has_answers_after_the_warm_up_and_names_why_a_module_is_missing(monkeypatch):
    monkeypatch.setitem(session_module.ENGINE_MODULES, "kernels", "tests.app.no_such_engine_module")
    session = Session()
    assert not session.has("flags")  # not before the warm-up
    session.load_engine()
    assert session.has("flags") and session.has("stats") and session.has("telemetry")
    assert not session.has("kernels") and "no_such_engine_module" in session.missing["kernels"]
    assert not session.has("no_engine_module_of_this_name")


async def test_a_module_that_fails_to_import_disables_its_view_not_the_app(monkeypatch):
    monkeypatch.setitem(session_module.ENGINE_MODULES, "kernels", "tests.app.no_such_engine_module")
    app = make_app(warmup=1, iters=5)
    async with app.run_test(size=(110, 34)) as pilot:
        await wait_ready(pilot)  # the rest loaded: flags, device, model list
        await wait_until(pilot, lambda: any("engine module kernels not available" in n for n in notifications(app)),
                         what="the line naming the missing module")
        await choose_model(pilot, TINY, "3x32x32")
        await flip(pilot, "mkldnn_enabled")
        await pilot.press("k")
        await wait_until(pilot, lambda: any(n.startswith("kernel view not available:") and "no_such_engine_module" in n
                                            for n in notifications(app)), what="the kernels key saying why not")
        assert app.pane("kernels").result is None
