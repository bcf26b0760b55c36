"""A custom model that declares no input shape: the app says the shape in the field is assumed, as the CLI does."""

from __future__ import annotations

from tests.app.helpers import TINY, analysed, notifications, wait_ready, wait_until
from torchperf_tui.app.app import TorchperfApp


async def test_choosing_a_model_without_an_input_shape_says_the_shape_is_assumed():
    app = TorchperfApp(poll_telemetry=False, device="cpu")
    async with app.run_test(size=(110, 34)) as pilot:
        await wait_ready(pilot)
        await pilot.click("#custom-spec")
        await pilot.press(*TINY, "enter")
        await wait_until(pilot, lambda: analysed(app, TINY), timeout=120, what="the analysis of tiny_cnn")
        await wait_until(pilot, lambda: any("assumed 3x224x224" in n for n in notifications(app)), timeout=30,
                         what="the note that the input shape is assumed")
        assert app.main.query_one("#shape").value == "3x224x224"
