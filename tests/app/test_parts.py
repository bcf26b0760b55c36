"""The app's small pure parts: histogram bins, the session's runs (SessionRuns) and baseline, number formatting."""

from __future__ import annotations

import dataclasses

import pytest

from tests.app.helpers import wait_until
from torchperf_tui.core.formatting import format_bytes, format_count, format_ms
from torchperf_tui.core.errors import user_message
from torchperf_tui.app.runs import SessionRuns, LiveRun
from torchperf_tui.app.widgets.timing.histogram import bin_count, histogram_bins


def test_histogram_bins_count_every_sample_once_including_the_maximum():
    samples = [1.0, 1.5, 2.0, 2.0, 3.0, 10.0]
    centres, counts, width = histogram_bins(samples, 9)
    assert sum(counts) == len(samples) and len(centres) == 9
    assert width == pytest.approx(1.0)
    assert counts[-1] == 1  # 10.0 lands in the last bin, not outside


def test_histogram_of_identical_samples_is_one_visible_bar():
    centres, counts, width = histogram_bins([2.0, 2.0, 2.0], 10)
    assert counts == [3] and centres == [2.0] and width > 0


def test_bin_count_grows_with_samples_within_bounds():
    assert bin_count(1) == 5 and bin_count(10_000) == 40 and 5 < bin_count(200) < 40


def _record(run_id: int, status: str = "done") -> LiveRun:
    return LiveRun(run_id=run_id, model="m", device="cpu", flags=None, flags_text="defaults",
                     status=status, samples_ms=[1.0])


def test_run_history_is_bounded_and_the_baseline_falls_back_to_the_oldest_complete_run():
    history = SessionRuns(capacity=3)
    for i in range(1, 6):
        history.add(_record(i, "cancelled" if i == 1 else "done"))
    assert [r.run_id for r in history] == [2, 4, 5]  # the baseline (the oldest complete run, 2) is kept
    assert history.baseline().run_id == 2  # 1 was cancelled
    history.baseline_id = 5
    assert history.baseline().run_id == 5
    history.baseline_id = 1  # no longer kept
    assert history.baseline().run_id == 2


def test_the_baseline_by_default_is_the_oldest_run_like_for_like_with_the_newest():
    # A new user timed resnet18, then resnet50 three times with flags flipped: every speed-up read 'n/a: model'
    # against run #1 until they found `b`.
    history = SessionRuns(capacity=10)
    history.add(_record(1))
    for i in (2, 3, 4):
        history.add(dataclasses.replace(_record(i), model="other"))
    assert history.baseline().run_id == 2
    history.add(_record(5))  # back to the first model: its oldest run again
    assert history.baseline().run_id == 1
    history.baseline_id = 3  # a baseline chosen with b stays, whatever runs after it
    history.add(_record(6))
    assert history.baseline().run_id == 3


def test_a_speedup_keeps_three_significant_figures_however_slow_the_run():
    from torchperf_tui.app.setup_diff import speedup_text
    from torchperf_tui.core.stats import compute_stats
    base = _record(1)
    base.stats = compute_stats([1.0, 1.0, 1.0])
    for p50, text in ((150.0, "0.00667x"), (2.0, "0.5x"), (1.2, "0.833x"), (0.8, "1.25x"), (0.5, "2.00x")):
        run = _record(2)
        run.stats = compute_stats([p50] * 3)
        assert speedup_text(run, base) == text
    assert speedup_text(base, base) == "baseline"


def test_formatting():
    assert format_count(11_689_512) == "11.7 M"
    assert format_count(1.82e9, "FLOPs") == "1.82 GFLOPs"
    assert format_bytes(3 * 1024**3) == "3.0 GiB"
    assert format_ms(0.25) == "250 µs" and format_ms(12.345) == "12.35 ms"
    assert format_bytes("n/a (no CUDA)") == "n/a (no CUDA)"


def test_one_line_error_keeps_engine_messages_and_names_other_exceptions():
    from torchperf_tui.core.errors import ShapeError

    assert user_message(ShapeError("bad shape 1x2")) == "bad shape 1x2"
    assert user_message(KeyError("x")) == "KeyError: 'x'"
    assert user_message(RuntimeError("first\nsecond")) == "RuntimeError: first"


def test_an_ab_pair_is_overlaid_alone_and_other_runs_by_the_last_four():
    from torchperf_tui.app.widgets.compare.compare_pane import overlaid_runs

    runs = [_record(i) for i in range(1, 6)]
    assert [r.run_id for r in overlaid_runs(runs)] == [2, 3, 4, 5]
    runs[3].arm, runs[4].arm = "A", "B"
    assert [r.run_id for r in overlaid_runs(runs)] == [4, 5]


def test_the_memory_pane_names_the_gap_between_nvml_and_the_allocator():
    from torchperf_tui.app.widgets.memory.memory_pane import process_gpu_text

    GiB = 1024**3
    text = process_gpu_text(3 * GiB, 2 * GiB)
    assert "3.0 GiB" in text and "1.0 GiB" in text and "CUDA context" in text


def test_the_first_frame_imports_no_pane_torch_numpy_or_scipy():
    """The panes and their widgets load after the first frame (screens/main.py mounts them): importing the app
    must not pull them in, nor what only the measurement process needs."""
    import subprocess
    import sys

    code = ("import sys, torchperf_tui.app.app\n"
            "print(sorted(m for m in sys.modules if m.startswith('torchperf_tui.app.widgets')\n"
            "             or m.split('.')[0] in ('torch', 'numpy', 'scipy', 'textual_plot')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_the_engine_modules_the_app_loads_import_no_torch():
    """The app imports the engine's result types (Session.load_engine) to read what the measurement process sends:
    each must load without torch, or the UI process would import it after the first run."""
    import subprocess
    import sys

    code = ("import importlib, sys\n"
            "from torchperf_tui.app.session import ENGINE_MODULES\n"
            "for module in ENGINE_MODULES.values():\n"
            "    importlib.import_module(module)\n"
            "    if 'torch' in sys.modules:\n"
            "        print(module)\n"
            "        break")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == ""


def test_throughput_search_progress_says_time_spent_budget_left_and_the_next_try():
    import time

    from torchperf_tui.app.widgets.throughput.throughput_pane import search_progress
    from torchperf_tui.engine.measurements.batch_search import BatchTry

    started = time.monotonic() - 30.0
    line = search_progress("resnet18", started, 120.0, BatchTry(batch=16, fits=True, phase="grow", seconds=4.0))
    assert "30 s of the 120 s budget" in line and "at most 90 s left" in line
    assert "next try batch 32, about 8 s" in line
    # A try that did not fit ends the doubling: no "next try" guess.
    line = search_progress("resnet18", started, 120.0, BatchTry(batch=64, fits=False, phase="grow", seconds=1.0))
    assert "next try" not in line


def test_run_colours_are_each_used_once_even_where_a_theme_repeats_one():
    from types import SimpleNamespace

    from torchperf_tui.app.widgets.timing.histogram import nice_ticks, theme_palette

    theme = SimpleNamespace(primary="#0178D4", warning="#ffa62b", success="#4EBF71", accent="#0178D4",
                            error="#ba3c5b", secondary=None)
    assert theme_palette(SimpleNamespace(current_theme=theme)) == ["#0178D4", "#ffa62b", "#4EBF71", "#ba3c5b"]
    # x ticks at round steps, few enough that their labels do not run together
    assert nice_ticks(20.3, 23.6, 4) == [21.0, 22.0, 23.0]
    assert nice_ticks(0, 1075, 4) == [0, 500, 1000]
    assert nice_ticks(1.0, 1.0, 4) == []


async def test_the_kernels_table_stacks_a_and_b_and_fits_long_layer_names_so_all_stay_in_sight_at_80_columns():
    from textual.app import App

    from tests.app.helpers import column_in_sight
    from torchperf_tui.app.widgets.kernels.kernels_pane import KernelsPane
    from torchperf_tui.engine.analysis.kernels import KernelComparison, LayerKernels
    from torchperf_tui.engine.analysis.kernel_time import KernelTime

    def layer(name: str) -> LayerKernels:
        return LayerKernels(name, a=[KernelTime("aten::mkldnn_convolution", 611.0, 1.0),
                                     KernelTime("aten::convolution_backward", 546.0, 1.0, phase="bwd")],
                            b=[KernelTime("aten::_slow_conv2d_forward", 3868.0, 1.0),
                               KernelTime("aten::convolution_backward", 4814.0, 1.0, phase="bwd")])

    names = [f"features.{i}.block.{i % 3}.squeeze_excitation.fc{i % 2 + 1}" for i in range(12)]
    result = KernelComparison(model="m", device="cpu", input_shape=(4, 3, 224, 224), a_spec="defaults",
                              b_spec="mkldnn=off", layers=[layer(n) for n in names], kind="cpu-op", note="",
                              iters=3, step="train (sgd)")

    class Host(App):
        def compose(self):
            yield KernelsPane(id="kernels")

    app = Host()
    async with app.run_test(size=(46, 24)) as pilot:  # about what the tab has beside the sidebar at 80x24
        pane = app.query_one(KernelsPane)
        pane.result = result
        table = app.query_one("#kernels-table")
        await wait_until(pilot, lambda: table.row_count > 0, what="the kernels")
        # A ran and B ran do not both fit beside the times: stacked, a row of two lines per layer and pass, the
        # pass and the choice under the layer's name.
        for key in ("layer", "us", "ran"):
            await wait_until(pilot, lambda: column_in_sight(table, key), what=f"the {key} column in sight")
        await wait_until(pilot, lambda: table.get_row_at(0)[0].startswith("…"), what="the long name cut")
        name, under = table.get_row_at(0)[0].split("\n")
        assert name.endswith("squeeze_excitation.fc1"[-8:]) and under.startswith("fwd · ") and "changed" in under
        a_ran, b_ran = table.get_row_at(0)[-1].split("\n")  # both, shortened to the width left
        assert a_ran.startswith("mkldnn_") and b_ran.startswith("_slow_") and b_ran.endswith("_forward")
        await pilot.resize_terminal(120, 24)  # wider: side by side, the whole name again
        await wait_until(pilot, lambda: app.query_one("#kernels-table").get_row_at(0)[0] == names[0],
                         what="the whole name")


async def test_a_resize_before_the_plot_has_composed_draws_once_it_has_instead_of_raising():
    # Seen in CI at 80x24 under load: the histogram's on_resize ran between mount() and the PlotWidget's
    # compose, and setting its margins raised NoMatches('Grid'), which took the app down.
    from textual.app import App

    from torchperf_tui.app.widgets.timing.histogram import LatencyHistogram

    class Holder(App):
        def compose(self):
            yield LatencyHistogram(id="h")

    async with Holder().run_test(size=(80, 24)) as pilot:
        histogram = pilot.app.query_one("#h", LatencyHistogram)
        histogram.attach_plot()
        assert not histogram._plot.is_mounted
        histogram.redraw()  # what on_resize does at once; before the fix: NoMatches
        await pilot.pause()
        assert histogram._plot.is_mounted and histogram._plot.margin_left in (6, 10)


def _plots():
    from textual_plot import PlotWidget

    from torchperf_tui.app.widgets.timing.exit_safe_plot import ExitSafePlot

    return ExitSafePlot, PlotWidget, {}


def _selects():
    from textual.widgets import Select

    from torchperf_tui.app.widgets.exit_safe_select import ExitSafeSelect

    return ExitSafeSelect, Select, {"options": [("a", "a")], "value": "a", "allow_blank": False}


@pytest.mark.parametrize("widgets", [_plots, _selects], ids=["plot", "select"])
async def test_a_widget_whose_children_were_pruned_by_an_exiting_app_mounts_without_raising(widgets):
    # Seen under load: an app told to exit while widgets mounted behind the first frame (SIGHUP during start-up,
    # a test done early) pruned their children before the library's own mount handlers queried them (textual-plot's
    # Grid, Select's overlay), and the app ended with NoMatches and exit code 1. A widget that composes no children
    # stands for one whose children were pruned.
    from textual.app import App
    from textual.css.query import NoMatches

    safe, library, kwargs = widgets()

    class Pruned(safe):
        def compose(self):
            return iter(())

    class PrunedLibraryWidget(library):
        def compose(self):
            return iter(())

    class Holder(App):
        def __init__(self, widget_type):
            super().__init__()
            self.widget_type = widget_type

        def compose(self):
            yield self.widget_type(**kwargs)

    async with Holder(Pruned).run_test(size=(80, 24)) as pilot:
        await pilot.pause()
    assert pilot.app.return_code is None  # no error: run_test ended it
    with pytest.raises(NoMatches):  # the library's own widget, pruned alike, raises
        async with Holder(PrunedLibraryWidget).run_test(size=(80, 24)) as pilot:
            await pilot.pause()


async def test_a_select_whose_value_bar_lost_its_label_to_an_exiting_app_mounts_without_raising():
    # A burner run: the bar that shows a select's value was still there, its label already pruned, and Select's
    # set-up of its value raised NoMatches ('#label'): one level below the case above.
    from textual.app import App
    from textual.css.query import NoMatches
    from textual.widgets import Select
    from textual.widgets._select import SelectCurrent, SelectOverlay  # noqa: PLC2701 (the parts to prune)

    from torchperf_tui.app.widgets.exit_safe_select import ExitSafeSelect

    class BareBar(SelectCurrent):
        def compose(self):
            return iter(())

    def pruned(base):
        class Pruned(base):
            def compose(self):
                yield BareBar("")
                yield SelectOverlay()
        return Pruned

    class Holder(App):
        def __init__(self, widget_type):
            super().__init__()
            self.widget_type = widget_type

        def compose(self):
            yield self.widget_type([("a", "a")], value="a", allow_blank=False)

    async with Holder(pruned(ExitSafeSelect)).run_test(size=(80, 24)) as pilot:
        await pilot.pause()
    assert pilot.app.return_code is None
    with pytest.raises(NoMatches):  # the library's own select, pruned alike, raises
        async with Holder(pruned(Select)).run_test(size=(80, 24)) as pilot:
            await pilot.pause()


def test_compares_columns_give_way_from_the_right_and_always_keep_the_run():
    # A table filled before its tab had a width kept rows with no column at all, and the next look at the
    # highlighted run raised (the Compare pane vanished from an 80x24 snapshot).
    from torchperf_tui.app.widgets.compare.compare_pane import COLUMNS, fitted_columns

    rows = [["#1", "21.23 ms", "baseline", "23.59 ms?", "tests.tinymodels:tiny_cnn 1x3x32x32", "47.1", "done"]]
    assert fitted_columns(rows, 0, 1) == (len(COLUMNS), None)  # not laid out yet: fitted again once it is
    assert fitted_columns(rows, 3, 1) == (1, None)
    assert fitted_columns(rows, 44, 1) == (4, None)  # run, median, speed-up and p99 (36 wide) beside the sidebar
    assert fitted_columns(rows, 55, 1) == (5, 17)  # the setup cut to what is left, its label whole
    assert fitted_columns(rows, 54, 1) == (4, None)  # less than its label: left out
    assert fitted_columns(rows, 200, 1) == (len(COLUMNS), None)
    from torchperf_tui.app.widgets.compare.compare_pane import wrapped_text

    assert wrapped_text("tests.tinymodels:tiny_cnn 1x3x32x32 float32 · eager", 26) == (
        "tests.tinymodels:tiny_cnn\n1x3x32x32 float32 · eager")
    assert wrapped_text("a b c d e f", 3, lines=2) == "a b\nc…"  # what a row's lines cannot hold is elided
