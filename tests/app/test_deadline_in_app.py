"""The app's "analysing…" does not wait for ever on a model that never finishes building: past its deadline
(measure/deadlines.py) the measurement process is stopped, the model's line says which part did not finish, and a
new process serves the next request."""

from __future__ import annotations

import functools

from tests.app.helpers import analysed, make_app, paste, run_custom_model, screen_text, wait_ready, wait_until
from torchperf_tui.measure.client import MeasurementProcess
from torchperf_tui.measure.deadlines import BUILD_ENV, Deadlines

STALLS = "tests.stalling_models:sleeps_when_built"


async def test_an_analysis_past_its_deadline_shows_its_line_and_the_next_model_is_analysed():
    # 15 s: a fresh process's first job imports the engine's modules before the model's own phases begin.
    measurement = functools.partial(MeasurementProcess, deadlines=Deadlines(build_s=15, pass_s=15))
    app = make_app(measurement=measurement, warmup=1, iters=5)
    async with app.run_test(size=(120, 36)) as pilot:
        await wait_ready(pilot)
        first_pid = app.session.measurement_pid
        await pilot.click("#custom-model")
        app.main.query_one("#custom-model").value = ""
        await paste(pilot, STALLS, "enter")
        said = (f"analysing {STALLS}: the model did not finish its analysis within 15 s; stopped its measurement "
                f"process ({BUILD_ENV}=SECONDS waits longer)")
        await wait_until(pilot, lambda: said in " ".join(screen_text(app, "#model-summary").split()),
                         what="the deadline's line in the model's summary")
        await wait_until(pilot, lambda: app.session.measurement_pid not in (None, first_pid), what="a new process")
        app.session.measure.deadlines = Deadlines()  # the next request, as long as a busy box needs
        await run_custom_model(pilot, "tests.tinymodels:tiny_cnn")
        assert analysed(app, "tests.tinymodels:tiny_cnn")
