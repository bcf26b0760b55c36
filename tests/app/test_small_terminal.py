"""The app at the size the README promises (80x24) and below it: the histogram keeps its bars beside the
sidebar, the sidebar's run options stay above the fold, every tab stays in sight, a narrow terminal starts
without the sidebar, and below the smallest size that works a plain notice says so (with q still in the
footer). Also the run options' iterations and warm-up, and what the help overlay's footer offers."""

from __future__ import annotations

from textual.widgets import Footer, Input, Tab
from textual.widgets._footer import FooterKey

from tests.app.recorded_answers import TimedRuns
from tests.app.helpers import (column_in_sight, flip, in_sight, make_app, row_cells, screen_text, shown_notifications,
                               wait_until)
from torchperf_tui.app.screens.layout import TABS
from torchperf_tui.core.stats import bulk_range

# Bar glyphs textual-plot draws (full and quadrant blocks); an axis alone has none of them.
BAR_GLYPHS = set("█▄▀▌▐▖▗▘▝▙▚▛▜▞▟")


def plot_rows(holder) -> list[str]:
    """The text of each row of a plot holder's drawing canvas, as drawn."""
    canvas = holder._plot.query_one("#plot")
    return [canvas.render_line(y).text for y in range(canvas.size.height)]


def inside_screen(app, widget) -> bool:
    region = widget.region
    return region.height > 0 and region.width > 0 and region.bottom <= app.size.height \
        and region.right <= app.size.width


def resized_to(app, width: int, height: int) -> bool:
    """The screen has fitted its layout to a terminal of width x height (its on_resize writes the size into the
    too-small notice, shown or not)."""
    return f"is {width}x{height};" in screen_text(app, "#too-small")


async def run_and_wait(pilot) -> None:
    app = pilot.app
    await pilot.press("r")
    await wait_until(pilot, lambda: app.session.runs.get(1) is not None and app.session.runs.get(1).finished,
                     what="the run to finish")


async def test_at_80x24_the_histogram_has_bars_beside_the_sidebar(tiny_app):
    # A recorded run of 60 samples, not disturbed: a real run on a busy box is marked disturbed, and its marks take
    # the rows the bars would have (tests/app/test_screen_80x24.py has the disturbed run at this size).
    async with tiny_app(size=(80, 24), answers={"time": TimedRuns()}) as pilot:
        app = pilot.app
        assert app.main.query_one("#sidebar").display  # 80 columns: the sidebar stays
        await run_and_wait(pilot)
        histogram = app.main.query_one("#latency-histogram")
        outside = lambda: bulk_range(app.session.runs.get(1).samples_ms).outside  # noqa: E731 (stalls: at the edge)
        await wait_until(pilot, lambda: histogram.has_plot and bool(histogram._plot._datasets)
                         and sum(histogram._plot._datasets[0].y) + outside() == 60, what="the bars of the run")
        await wait_until(pilot, lambda: len([row for row in plot_rows(histogram) if BAR_GLYPHS & set(row)]) >= 4,
                         what="the bars drawn on at least 4 rows")
        # The axis labels moved to one caption line; the stats still say what they are.
        await wait_until(pilot, lambda: "latency, ms" in screen_text(app, "#latency-histogram .plot-caption"),
                         what="the caption")
        stats = screen_text(app, "#run-stats")
        for word in ("p50", "p99", "mean", "std", "FPS", "at p50", "n=60"):
            assert word in stats
        # The run line says the phase first, so a cut line still says what the run is doing.
        assert screen_text(app, "#run-status").startswith("run #1 · done")


async def test_the_first_frame_at_80x24_is_drawn_in_the_short_layout(monkeypatch):
    """The screen fits the terminal before its first frame: at 80x24 the sidebar's title, which the short layout
    hides, is never painted (it was, in the first frame, then vanished ~5 ms later at the screen's first resize,
    and bench/first_frame.py's marker, that title, came and went with it)."""
    from textual.widgets import Label

    from tests.fakes.fake_measurement import FakeMeasurement

    painted: list[str] = []  # the ids of the labels drawn, frame after frame
    render_lines = Label.render_lines

    def recording_render_lines(self, crop):
        painted.append(self.id or "")
        return render_lines(self, crop)

    monkeypatch.setattr(Label, "render_lines", recording_render_lines)
    app = make_app(measurement=FakeMeasurement())
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_until(pilot, lambda: painted, what="the first frame's labels")
        await pilot.pause()
    assert painted and "picker-title" not in painted


async def test_at_80x24_the_run_options_are_above_the_fold(tiny_app):
    async with tiny_app(size=(80, 24)) as pilot:
        app = pilot.app
        for selector in ("#option-iters", "#option-warmup", "#option-shapes", "#option-compile", "#option-quant",
                         "#option-flip"):
            await wait_until(pilot, lambda: inside_screen(app, app.main.query_one(selector)), what=f"{selector} in sight")
        # On this CPU box the CUDA flags do nothing: their rows give way to one line that names them.
        na_line = screen_text(app, "#flags-na")
        assert "cudnn.benchmark" in na_line and "Device tab" in na_line
        assert not app.main.query_one("#flag-row-cudnn_benchmark").display or \
            app.main.query_one("#flag-row-cudnn_benchmark").region.height == 0
        # ... and the Device tab says why.
        assert "a CUDA setting" in screen_text(app, "#device-flags")


async def test_every_tab_is_in_sight_at_80x24_and_full_labels_come_back_when_wide(tiny_app):
    async with tiny_app(size=(80, 24)) as pilot:
        app = pilot.app
        tabs = list(app.main.query(Tab))
        assert len(tabs) == len(TABS) == 11
        await wait_until(pilot, lambda: [t.label_text for t in tabs][:2] == ["Time", "Cmp"]
                         and all(inside_screen(app, tab) for tab in tabs), what="every tab in sight, short labels")
        await pilot.resize_terminal(130, 34)
        await wait_until(pilot, lambda: [t.label_text for t in app.main.query(Tab)][:2] == ["Timing", "Compare"],
                         what="the full labels")


async def test_below_the_smallest_size_a_notice_and_q_still_in_the_footer(tiny_app):
    async with tiny_app(size=(100, 30)) as pilot:
        app = pilot.app
        await pilot.resize_terminal(60, 15)
        notice = app.main.query_one("#too-small")
        await wait_until(pilot, lambda: notice.display and resized_to(app, 60, 15), what="the notice")
        assert not app.main.query_one("#body").display
        # the footer composes its keys again after a resize: look for q in what it holds at each check
        def quit_keys():
            return [key for key in app.main.query_one(Footer).query(FooterKey) if key.action == "app.quit"
                    or key.key == "q"]
        await wait_until(pilot, lambda: any(inside_screen(app, key) for key in quit_keys()), what="q in sight")
        await pilot.resize_terminal(100, 30)
        await wait_until(pilot, lambda: not notice.display and app.main.query_one("#body").display, what="the body back")


async def test_a_narrow_terminal_hides_the_sidebar_until_h_shows_it(tiny_app):
    async with tiny_app(size=(100, 30)) as pilot:
        app = pilot.app
        sidebar = app.main.query_one("#sidebar")
        await pilot.resize_terminal(66, 24)
        await wait_until(pilot, lambda: not sidebar.display, what="the sidebar hidden")
        await pilot.resize_terminal(90, 24)  # wide enough again: it comes back by itself
        await wait_until(pilot, lambda: sidebar.display, what="the sidebar back")
        await pilot.resize_terminal(66, 24)
        await wait_until(pilot, lambda: not sidebar.display, what="the sidebar hidden again")
        await pilot.press("h")
        await wait_until(pilot, lambda: sidebar.display, what="the sidebar shown by h")
        await pilot.resize_terminal(64, 24)  # the user's choice stands when the terminal changes
        await wait_until(pilot, lambda: resized_to(app, 64, 24), what="the layout fitted to 64x24")
        await pilot.pause(0.2)
        assert sidebar.display


async def test_iterations_and_warmup_are_run_options(tiny_app):
    async with tiny_app(size=(100, 30), warmup=3, iters=20) as pilot:
        app = pilot.app
        iters = app.main.query_one("#option-iters", Input)
        warmup = app.main.query_one("#option-warmup", Input)
        assert (iters.value, warmup.value) == ("20", "3")
        for field, text in ((iters, "7"), (warmup, "2")):
            field.focus()
            field.value = ""
            await pilot.press(*text, "enter")
        await pilot.press("escape")
        await run_and_wait(pilot)
        record = app.session.runs.get(1)
        assert len(record.samples_ms) == 7 and len(record.warmup_ms) == 2
        # A bad count is refused in one line and the field shows the value in use again.
        iters.focus()
        iters.value = ""
        await pilot.press(*"0", "enter")
        refused = lambda: any("iters" in n.title and "at least 1" in n.message for n in shown_notifications(app))  # noqa: E731
        await wait_until(pilot, refused, what="the refusal")
        await wait_until(pilot, lambda: iters.value == "7", what="the value in use back in the field")
        assert app.session.iters == 7
        warmup.focus()
        warmup.value = ""
        await pilot.press(*"auto", "enter")
        assert app.session.warmup == "auto"


async def test_the_device_tab_gives_the_roofline_reasons_the_timing_line_cuts(tiny_app):
    async with tiny_app(size=(80, 24), warmup=1, iters=10) as pilot:
        app = pilot.app
        await run_and_wait(pilot)
        await wait_until(pilot, lambda: "roofline" in screen_text(app, "#run-roofline"), what="the roofline line")
        assert "Device tab" in screen_text(app, "#run-roofline")
        await wait_until(pilot, lambda: "run #1" in screen_text(app, "#device-roofline"), what="the reasons")
        reasons = screen_text(app, "#device-roofline")
        assert "needs FMA units per core and the sustained vector clock" in reasons  # the whole reason


async def test_the_help_overlay_footer_offers_only_what_works_there(tiny_app):
    async with tiny_app(size=(100, 30)) as pilot:
        app = pilot.app
        await pilot.press("escape", "question_mark")
        await wait_until(pilot, lambda: app.screen is not app.main and app.screen.query(FooterKey), what="the help")
        await pilot.pause(0.2)  # the footer's keys settled
        keys = [key.description for key in app.screen.query(FooterKey)]
        assert keys == ["Close"], keys
        await pilot.press("q")  # closes the help, does not quit
        await wait_until(pilot, lambda: app.screen is app.main, what="the help closed")
        assert app.is_running


async def test_at_80x24_layers_history_and_compare_keep_their_key_columns_in_sight(tiny_app):
    async with tiny_app(size=(80, 24), warmup=1, iters=8) as pilot:
        app = pilot.app
        await pilot.press("3")
        layers = app.main.query_one("#layers-table")
        await wait_until(pilot, lambda: layers.row_count > 0, what="the layers")
        for key in ("name", "flops", "share"):
            await wait_until(pilot, lambda: column_in_sight(layers, key), what=f"the {key} column in sight")
        await pilot.press("1")
        await run_and_wait(pilot)
        await flip(pilot, "mkldnn_enabled")  # run 2, oneDNN off: like for like with run 1
        await wait_until(pilot, lambda: app.session.runs.get(2) is not None and app.session.runs.get(2).finished,
                         what="run 2")
        await pilot.press("escape", "2")
        compare = app.main.query_one("#compare-table")
        await wait_until(pilot, lambda: compare.row_count == 2 and column_in_sight(compare, "speedup"),
                         what="both runs and their speed-up in sight")
        assert str(compare.get_row_at(1)[2]).endswith("x")  # a speed-up, not n/a
        # 8 samples cannot support a p99: its '?' is said on the pane (it was a tooltip, out of a keyboard's reach)
        assert "?" in str(compare.get_row_at(1)[3])
        legend = app.main.query_one("#compare-legend")
        await wait_until(pilot, lambda: in_sight(app, legend) and "? too few samples" in screen_text(app, "#compare-legend"),
                         what="what the '?' means, in sight")
        await pilot.press("8")
        history = app.main.query_one("#history-table")
        await wait_until(pilot, lambda: history.row_count == 2, what="both runs in the history")
        await wait_until(pilot, lambda: column_in_sight(history, "model") and column_in_sight(history, "p99"),
                         what="the model and p99 in sight")
        assert "tiny_cnn" in row_cells(history, 0)["model"]


async def test_layer_columns_fit_the_model_shown_not_an_earlier_one(tiny_app):
    from types import SimpleNamespace

    def complexity(names):
        layers = [SimpleNamespace(name=n, type="Conv2d", flops=1000 * (i + 1), params=10, output_shape=(1, 8, 4, 4),
                                  output_bytes=512) for i, n in enumerate(names)]
        return SimpleNamespace(flops=sum(layer.flops for layer in layers), macs=1, params_total=10, size_bytes=40,
                               input_shape=(1, 3, 32, 32), dtype="float32", layers=layers)

    async with tiny_app(size=(120, 30)) as pilot:
        app = pilot.app
        await pilot.press("3")
        pane = app.pane("layers")
        table = app.main.query_one("#layers-table")
        long_names = ["backbone.body.layer4.2.conv3", "roi_heads.box_predictor.cls_score.extra.long.name"]
        pane.show_complexity("detector", complexity(long_names))
        await pilot.pause(0.1)
        wide = table.columns[next(k for k in table.columns if k.value == "name")].get_render_width(table)
        pane.show_complexity("small", complexity(["conv1", "fc"]))
        await pilot.pause(0.1)
        narrow = table.columns[next(k for k in table.columns if k.value == "name")].get_render_width(table)
        assert narrow < wide and narrow <= len("layer") + 2
        # At 80 columns beside the sidebar a long path keeps its end, and FLOPs stays in sight.
        pane.show_complexity("detector", complexity(long_names))
        await pilot.resize_terminal(80, 24)
        await wait_until(pilot, lambda: str(table.get_row_at(0)[0]).startswith("…"), what="the long name cut")
        assert str(table.get_row_at(0)[0]).endswith("4.2.conv3")
        await wait_until(pilot, lambda: column_in_sight(table, "flops"), what="FLOPs in sight")


async def test_the_input_fields_say_their_own_errors_and_float16_on_the_cpu_is_noted(tiny_app):
    from textual.widgets import Select

    async with tiny_app(size=(100, 30)) as pilot:
        app = pilot.app
        shape = app.main.query_one("#shape", Input)
        shape.focus()
        shape.value = ""
        await pilot.press(*"3x-5x32", "enter")
        await wait_until(pilot, lambda: "error" in screen_text(app, "#model-summary"), what="the shape error")
        summary = screen_text(app, "#model-summary")
        assert "input '3x-5x32'" in summary and "1x3x-5x32" not in summary
        shape.value = ""
        await pilot.press(*"3x32x32", "enter")
        batch = app.main.query_one("#batch", Input)
        batch.focus()
        batch.value = ""
        await pilot.press(*"100000", "enter")
        # all six digits in sight (it showed 0000)
        await wait_until(pilot, lambda: batch.content_region.width >= len("100000"), what="the six digits in sight")
        note = app.main.query_one("#dtype-note")
        assert not note.display
        app.main.query_one("#dtype", Select).value = "float16"
        await wait_until(pilot, lambda: note.display and "float16 on the CPU" in screen_text(app, "#dtype-note"),
                         what="the float16 note")
        app.main.query_one("#dtype", Select).value = "bfloat16"
        await wait_until(pilot, lambda: not note.display, what="the note gone")


async def test_a_training_step_with_mixed_precision_is_a_run_option(tiny_app):
    from textual.widgets import Select

    async with tiny_app(size=(80, 24), warmup=1, iters=6) as pilot:
        app = pilot.app
        for selector in ("#option-step", "#option-amp"):
            assert inside_screen(app, app.main.query_one(selector)), selector  # in sight at 80x24 too
        await run_and_wait(pilot)  # run 1: inference
        app.main.query_one("#option-step", Select).value = "train:adamw"  # a changed step starts run 2
        await wait_until(pilot, lambda: app.session.runs.get(2) is not None and app.session.runs.get(2).finished,
                         what="run 2")
        # The Layers tab counts the training step's backward per layer, in a column of its own.
        picker = app.pane("picker")
        await wait_until(pilot, lambda: picker.complexity is not None and picker.complexity.step == "train",
                         what="the training step's analysis")
        await wait_until(pilot, lambda: "bwd" in app.main.query_one("#layers-table").columns, what="the column")
        assert "+ backward" in screen_text(app, "#layers-summary")
        app.main.query_one("#option-amp", Select).value = "bf16"  # run 3
        await wait_until(pilot, lambda: app.session.runs.get(3) is not None and app.session.runs.get(3).finished,
                         what="run 3")
        run = app.session.runs.get(3)
        assert run.status == "done", run.error
        assert (run.result.step, run.result.optimizer, run.result.amp) == ("train", "adamw", "bf16")
        assert "train (adamw) · amp bf16" in screen_text(app, "#run-status")
        await wait_until(pilot, lambda: "achieved" in screen_text(app, "#run-roofline"), what="the roofline line")
        line = screen_text(app, "#run-roofline")  # FLOPs of forward and backward over the step's median
        assert "run #3 roofline of a training step" in line and "intensity n/a" in line, line
        # Compare puts no speed-up between an inference run and a training step.
        from torchperf_tui.app.setup_diff import speedup_text

        assert speedup_text(app.session.runs.get(3), app.session.runs.get(1)) == "n/a: step"
        # The throughput search takes the same step: each try is a training step under autocast.
        app.session.max_batch = 4
        await pilot.press("t")
        status = lambda: screen_text(app, "#throughput-status")  # noqa: E731
        await wait_until(pilot, lambda: "done" in status() or "error" in status(), what="the search")
        assert "train (adamw) · amp bf16 · done" in status(), status()
        assert "samples/s at batch" in screen_text(app, "#throughput-summary")


async def test_d_checks_a_training_step_when_step_is_train(tiny_app):
    from textual.widgets import Select

    async with tiny_app(size=(100, 40)) as pilot:
        app = pilot.app
        with app.main.query_one("#option-step", Select).prevent(Select.Changed):
            app.main.query_one("#option-step", Select).value = "train:sgd"
        app.pane("options").options["step"] = "train:sgd"
        await pilot.press("d")
        await wait_until(pilot, lambda: app.pane("timing").last_determinism is not None, what="the check")
        report = app.pane("timing").last_determinism
        assert report.step == "train" and report.bitwise_equal
        assert "training steps from the same state" in screen_text(app, "#run-note")
