"""A custom model that declares no input shape: the app says, beside the input field, that the shape there is
assumed, as the CLI does; typing a shape or choosing another model takes the note away."""

from __future__ import annotations

from tests.app.helpers import TINY, analysed, make_app, paste, screen_text, wait_ready, wait_until


async def test_choosing_a_model_without_an_input_shape_says_the_shape_is_assumed_until_one_is_typed():
    app = make_app(device="cpu")
    async with app.run_test(size=(110, 34)) as pilot:
        await wait_ready(pilot)
        await pilot.click("#custom-model")
        await paste(pilot, TINY, "enter")
        await wait_until(pilot, lambda: analysed(app, TINY), timeout=120, what="the analysis of tiny_cnn")
        note = app.main.query_one("#input-note")
        await wait_until(pilot, lambda: "input 3x224x224 assumed" in screen_text(app, "#input-note"), timeout=30,
                         what="the note that the input shape is assumed")
        assert "does not say its input shape" in str(note.tooltip)
        shape = app.main.query_one("#shape")
        shape.value = "3x32x32"
        await pilot.click("#shape")
        await pilot.press("enter")
        await wait_until(pilot, lambda: not note.display, what="the note gone once a shape is typed")
        await wait_until(pilot, lambda: analysed(app, TINY) and app.pane("picker").complexity.input_shape == (1, 3, 32, 32),
                         timeout=60, what="the analysis at the shape typed")
        assert not note.display
