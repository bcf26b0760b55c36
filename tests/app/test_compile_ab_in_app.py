"""In A/B mode a change of the graph select compares the model as it was against as chosen now: eager against
compiled, each arm's compile its own SPEC's (the measurement process compiles one arm at most); a flag flipped with a
compiled selection still compares the flag sets eager, and says so. The catalogue, the analyses and the runs are
recorded answers; the A/B is held, its request read."""

from __future__ import annotations

from textual.widgets import Select

from tests.app.helpers import choose_model, notifications, wait_ready, wait_until
from tests.app.test_picker_sources import sources_app
from tests.fakes.fake_measurement import HELD, Recorded


def ab_requests(fake) -> list[dict]:
    return [params for kind, params in fake.requests if kind == "ab"]


async def test_flipping_the_graph_select_in_ab_mode_compares_eager_against_compiled():
    app, fake = sources_app(answers={"ab": Recorded(HELD)}, warmup=1, iters=5)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_ready(pilot)
        await choose_model(pilot, "resnet18", "3x64x64")
        await pilot.press("r")
        await wait_until(pilot, lambda: app.session.runs.get(1) is not None and app.session.runs.get(1).finished,
                         what="the eager run")
        app.main.query_one("#option-flip", Select).value = "ab"
        app.main.query_one("#option-compile", Select).value = "reduce-overhead"
        await wait_until(pilot, lambda: len(ab_requests(fake)) == 1, what="the A/B's request")
        params = ab_requests(fake)[0]
        assert (params["a"].compile, params["b"].compile) == ("eager", "reduce-overhead")
        a, b = app.session.runs.get(2), app.session.runs.get(3)
        assert (a.arm, b.arm) == ("A", "B") and (a.compile, b.compile) == (None, "reduce-overhead")
        # back to eager: the compiled selection as it was (A) against eager now (B)
        app.main.query_one("#option-compile", Select).value = "eager"
        await wait_until(pilot, lambda: len(ab_requests(fake)) == 2, what="the second A/B's request")
        params = ab_requests(fake)[1]
        assert (params["a"].compile, params["b"].compile) == ("reduce-overhead", "eager")
        # a flag flipped while compiled: the flag sets compared eager, said once
        app.main.query_one("#option-compile", Select).value = "default"
        await wait_until(pilot, lambda: len(ab_requests(fake)) == 3, what="the third A/B's request")
        await pilot.press("escape")
        app.pane("compare").start_ab(app.pane("flags").flags, app.pane("flags").flags.replace(num_threads=1))
        await wait_until(pilot, lambda: len(ab_requests(fake)) == 4, what="the flags' A/B")
        params = ab_requests(fake)[3]
        assert params["a"].compile is None and params["b"].compile is None
        assert any("A/B compares the flag sets eager: flip the graph select" in line for line in notifications(app))
