"""UI behaviour, driven with Pilot on the CPU with a tiny model (tests.tinymodels:tiny_cnn at 3x32x32)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.app.helpers import (TINY, GiB, analysed, choose_model, first_recorded_run, flip, make_app, notifications, run_and_wait,
                               screen_text, wait_ready, wait_until)

ROOT = Path(__file__).resolve().parents[2]


def test_app_module_imports_no_torch_numpy_or_engine():
    """The first frame paints before torch: importing the app must not pull torch, numpy, scipy, textual-plot."""
    code = ("import sys; import torchperf_tui.app.app; "
            "heavy = [m for m in ('torch', 'numpy', 'scipy', 'textual_plot', 'torchvision', 'timm', 'transformers') if m in sys.modules]; "
            "engine = [m for m in sys.modules if m.startswith('torchperf_tui.engine.') "
            "and m != 'torchperf_tui.core.errors']; print(heavy + engine)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT,
                         env={"PYTHONPATH": str(ROOT / "tui"), "PATH": "/usr/bin:/bin"}, check=True)
    assert out.stdout.strip() == "[]"


async def test_panes_say_loading_before_the_engine_and_fill_in_after():
    app = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_until(pilot, lambda: bool(app.main.query("#device-facts")), what="the lazy device pane")
        # The engine worker has not reported yet on the first frame.
        if app.session.report is None:
            assert "loading" in screen_text(app, "#device-facts")
        await wait_ready(pilot)
        assert "loading" not in screen_text(app, "#device-facts")
        assert "CPU" in screen_text(app, "#device-facts")
        assert "No CUDA device" in screen_text(app, "#device-facts")  # this box has none
        assert "pick a model" in screen_text(app, "#model-summary")


async def test_pick_a_model_by_typing_shows_its_flops_and_layers():
    app = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_ready(pilot)
        await pilot.press("slash", *"squeezenet1_0")
        listing = app.main.query_one("#model-list")
        visible = [listing.get_option_at_index(i).id for i in range(listing.option_count)]
        assert "squeezenet1_0" in visible and "resnet18" not in visible  # the list is filtered
        await pilot.press("enter")
        await wait_until(pilot, lambda: analysed(app, "squeezenet1_0"), what="analysis")
        from torchperf_tui.core.formatting import format_count

        summary = screen_text(app, "#model-summary")
        assert "squeezenet1_0" in summary
        assert format_count(app.pane("picker").complexity.flops, "FLOPs") in summary and "GFLOPs" in summary
        assert format_count(app.pane("picker").complexity.params_total) in summary
        await pilot.press("3")  # chosen with enter, the focus left the filter: keys are commands again
        assert app.main.query_one("#model-filter").value == "squeezenet1_0"
        await wait_until(pilot, lambda: app.main.active_tab() == "layers", what="the Layers tab")
        table = app.main.query_one("#layers-table")
        assert table.row_count == len(app.pane("picker").complexity.layers) > 10


async def test_a_run_fills_progress_stats_and_histogram(tiny_app):
    async with tiny_app(size=(100, 40), warmup=3, iters=150) as pilot:
        app = pilot.app
        await run_and_wait(pilot)
        record = app.session.runs.get(1)
        assert record.status == "done", record.error
        assert len(record.samples_ms) == 150 and len(record.warmup_ms) == 3
        stats = screen_text(app, "#run-stats")
        for word in ("mean", "p50", "p90", "p99", "std", "FPS", "first"):
            assert word in stats
        # FPS says which statistic it comes from: the median's figure beside the median, the mean's named.
        from torchperf_tui.core.formatting import format_number

        assert f"FPS {format_number(record.stats.fps_at_median, digits=1)} at p50" in stats.replace("\n", " ")
        assert f"({format_number(record.stats.fps, digits=1)} at the mean)" in stats.replace("\n", " ")
        histogram = app.main.query_one("#latency-histogram")
        assert len(histogram.samples) == 150
        # Bars drawn (redraws are throttled to a few a second, so the last one may lag a little): every sample in a
        # bar, or (a stall of a busy box) counted at the histogram's edge.
        from torchperf_tui.core.stats import bulk_range

        await wait_until(pilot, lambda: histogram.has_plot and bool(histogram._plot._datasets)
                         and sum(histogram._plot._datasets[0].y) + bulk_range(record.samples_ms).outside == 150,
                         what="bars of all 150 samples")
        assert app.main.query_one("#run-progress").percentage == 1.0


async def test_a_completed_run_is_in_the_history_file_at_once(tmp_path, tiny_app):
    path = tmp_path / "runs.jsonl"
    async with tiny_app(size=(100, 30), warmup=1, iters=5, history_path=str(path)) as pilot:
        record = await first_recorded_run(pilot, path)
        app = pilot.app
        assert record.model == TINY and len(record.samples_ms) == 5
        result = app.session.runs.get(1).result
        # The flags as asked, with the thread count the run used where they left it to the process (never "default").
        assert result.flags.num_threads is None and isinstance(result.threads_used, int)
        assert record.flags == {**result.flags.to_dict(), "num_threads": result.threads_used}


async def test_samples_arrive_in_batches_not_one_message_per_iteration(tiny_app):
    async with tiny_app(size=(100, 30), warmup=0, iters=2000) as pilot:
        app = pilot.app
        await pilot.press("r")
        await wait_until(pilot, lambda: app.session.runs.get(1) is not None and app.session.runs.get(1).finished,
                         what="the run to finish")
        record = app.session.runs.get(1)
        # every timed iteration the engine took is on screen: all 2000, or (on a box slow enough to reach the run's
        # 60 s time budget first, as beside two CPU burners: 1597) as many as the result says it took
        assert record.status == "done" and record.samples_ms == record.result.samples_ms
        assert len(record.samples_ms) == 2000 or (record.result.budget_stopped and len(record.samples_ms) > 100)
        assert 2 <= record.batches < len(record.samples_ms) / 4  # first iteration + timed batches, far fewer


async def test_flipping_a_flag_mid_run_cancels_it_and_restarts_with_the_new_flags(tiny_app):
    async with tiny_app(size=(100, 30), warmup=0, iters=1_000_000) as pilot:
        app = pilot.app
        await pilot.press("r")
        await wait_until(pilot, lambda: len(app.session.runs.get(1).samples_ms) > 20, what="run 1 in flight")
        assert app.pane("flags").flags.mkldnn_enabled is True
        await flip(pilot, "mkldnn_enabled")  # the switch for oneDNN
        await wait_until(pilot, lambda: app.session.runs.get(2) is not None
                         and len(app.session.runs.get(2).samples_ms) > 20, what="run 2 in flight")
        await wait_until(pilot, lambda: app.session.runs.get(1).status == "cancelled", what="run 1 cancelled")
        first, second = app.session.runs.get(1), app.session.runs.get(2)
        assert first.result.cancelled
        assert second.flags.mkldnn_enabled is False and first.flags.mkldnn_enabled is True
        await pilot.press("c")
        await wait_until(pilot, lambda: app.session.runs.get(2).finished, what="run 2 cancelled")
        assert app.session.runs.get(2).status == "cancelled"
        # What torch itself reported in the measurement process, inside each run's flags context.
        assert first.result.flags_in_effect.mkldnn_enabled is True
        assert second.result.flags_in_effect.mkldnn_enabled is False


async def test_release_memory_key_shows_what_was_freed():
    app = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_ready(pilot)
        await pilot.press("e")
        await wait_until(pilot, lambda: app.pane("memory").last_release is not None, what="the release")
        assert any(app.pane("memory").last_release.summary() in text for text in notifications(app))
        assert "released" in app.pane("memory").last_release.summary()


async def test_model_errors_are_notified_and_earlier_results_stay(tiny_app):
    async with tiny_app(size=(100, 30), warmup=0, iters=30) as pilot:
        app = pilot.app
        await pilot.press("r")
        await wait_until(pilot, lambda: app.session.runs.get(1).finished, what="run 1")
        await pilot.click("#custom-model")
        app.main.query_one("#custom-model").value = ""
        await pilot.press(*"resnt18", "enter")
        await wait_until(pilot, lambda: any("did you mean" in t for t in notifications(app)),
                         what="the error notification")
        assert "resnt18" in screen_text(app, "#model-summary") and "error" in screen_text(app, "#model-summary")
        # A model whose forward raises: the run fails with a one-line error, the app keeps going.
        await pilot.click("#custom-model")  # the ⏎ that chose the last spec moved the focus to the list
        app.main.query_one("#custom-model").value = "tests.tinymodels:oom_model"
        await pilot.press("enter")
        await pilot.press("escape", "r")
        await wait_until(pilot, lambda: app.session.runs.get(2) is not None and app.session.runs.get(2).finished,
                         what="the failing run")
        assert app.session.runs.get(2).status == "failed" and "out of memory" in app.session.runs.get(2).error.lower()
        assert app.session.runs.get(1).status == "done"  # still there
        await pilot.press("2")
        assert app.main.query_one("#compare-table").row_count == 2


async def test_tiny_and_resized_terminals_do_not_crash():
    app = make_app(poll_telemetry=True, interval=0.2)
    async with app.run_test(size=(40, 12)) as pilot:
        await wait_ready(pilot)
        for size in ((80, 24), (30, 8), (160, 50), (40, 12)):
            await pilot.resize_terminal(*size)
            for key in ("2", "3", "4", "5", "1"):
                await pilot.press(key)
            await pilot.pause(0.3)
        assert app.is_running
        await wait_until(pilot, lambda: app.pane("memory").last_telemetry is not None, what="a telemetry sample")


async def test_help_screenshot_and_command_palette(tmp_path):
    app = make_app(screenshot_dir=str(tmp_path))
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_ready(pilot)
        await pilot.press("question_mark")
        assert type(app.screen).__name__ == "HelpScreen"
        await pilot.press("escape")
        assert app.screen is app.main
        await pilot.press("s")
        await wait_until(pilot, lambda: list(tmp_path.glob("*.svg")), what="the screenshot")
        saved = list(tmp_path.glob("*.svg"))
        await wait_until(pilot, lambda: any(str(saved[0].name) in t for t in notifications(app)), what="its toast")
        assert len(saved) == 1
        titles = [c.title for c in app.get_system_commands(app.screen)]
        for title in ("Run timing", "Cancel run", "Release memory", "Save screenshot", "Help"):
            assert title in titles


@pytest.mark.own_process  # the app's own process goes with it
async def test_quit_key_cancels_a_run_in_flight(tiny_app):
    async with tiny_app(size=(100, 30), warmup=0, iters=1_000_000) as pilot:
        app = pilot.app
        await pilot.press("r")
        await wait_until(pilot, lambda: len(app.session.runs.get(1).samples_ms) > 5, what="run in flight")
        process = app.session.measure._process
        assert process.poll() is None
        await pilot.press("q")
    assert process.wait(timeout=5) is not None  # the measurement process went with the app


async def test_autostart_opens_with_the_model_chosen_and_a_run_started():
    app = make_app(model=TINY, autostart=True, warmup=0, iters=20)
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_until(pilot, lambda: app.session.runs.get(1) is not None and app.session.runs.get(1).finished,
                         timeout=90, what="the autostarted run")
        assert app.pane("picker").model == TINY and app.session.runs.get(1).status == "done", app.session.runs.get(1).error


def app_with_a_slow_engine():
    """An app whose engine loads once the test sets the event it returns with it (the engine's import on a cold box
    takes seconds)."""
    import threading

    app = make_app(model=TINY, warmup=0, iters=20)
    engine_may_load = threading.Event()
    load_engine = app.session.load_engine

    def slow_engine():
        engine_may_load.wait(60)
        load_engine()

    app.session.load_engine = slow_engine
    return app, engine_may_load


async def test_r_pressed_while_the_app_starts_is_held_and_runs_once_the_engine_is_in():
    # A new user pressed r as the first frame came: nothing happened, and nothing said why. And a model given on
    # the command line was lost when the catalogue came before the engine ("the model registry is still loading").
    app, engine_may_load = app_with_a_slow_engine()
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_until(pilot, app.main.panes_mounted, what="the panes")
        await pilot.press("r")
        await pilot.press("r")  # pressed twice while it loads: one run
        # the catalogue listed before the engine is in (a warm box): the model given is chosen once it is
        await wait_until(pilot, lambda: app.main.query_one("#model-list").option_count > 1, what="the catalogue")
        await pilot.pause(0.3)
        assert app.session.runs.get(1) is None
        engine_may_load.set()
        await wait_until(pilot, lambda: app.session.runs.get(1) is not None and app.session.runs.get(1).finished,
                         timeout=90, what="the held run")
        assert app.session.runs.get(1).status == "done" and app.session.runs.get(2) is None
        assert app.pane("picker").model == TINY


async def test_once_the_panes_are_in_asking_again_walks_no_widget():
    # Each look walked the whole screen once per pane: the screenshot script's wait on an A/B asked it ten times a
    # second and took half a core beside the A/B, which was then marked "noisy host" (0.50 of a core; 0.07 after).
    app, engine_may_load = app_with_a_slow_engine()
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_until(pilot, app.main.panes_mounted, what="the panes")
        engine_may_load.set()

        def no_walk(*args, **kwargs):
            raise AssertionError("panes_mounted queried the screen again")

        app.main.query = no_walk
        try:
            assert app.main.panes_mounted()
        finally:
            del app.main.query


async def test_until_the_panes_are_in_a_look_walks_the_screen_once_not_once_per_pane(monkeypatch):
    # The App polls it every 20 ms at start-up: fifteen walks of the screen a look took a tenth of the CPU of an
    # app's start (its panes' mount among them).
    from torchperf_tui.app.screens.main import MainScreen

    walks, looks = [], []  # the walks of the look under way; how many each look took
    query, panes_mounted = MainScreen.query, MainScreen.panes_mounted

    def counted_query(self, *args, **kwargs):
        walks.append(args)
        return query(self, *args, **kwargs)

    def counted_look(self):
        walks.clear()
        answer = panes_mounted(self)
        looks.append(len(walks))
        return answer

    monkeypatch.setattr(MainScreen, "query", counted_query)
    monkeypatch.setattr(MainScreen, "panes_mounted", counted_look)
    app, engine_may_load = app_with_a_slow_engine()
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_until(pilot, app.main.panes_mounted, what="the panes")
        engine_may_load.set()
    assert looks and max(looks) == 1, looks  # the look that found them in walked once, for the selects


async def test_a_pressed_while_the_app_starts_is_held_and_answered_once_the_engine_is_in():
    # a (and k) read the flags, which come with the engine: pressed before, they did nothing and said nothing.
    app, engine_may_load = app_with_a_slow_engine()
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_until(pilot, app.main.panes_mounted, what="the panes")
        await pilot.press("a")
        await pilot.pause(0.3)
        assert "A/B: held until the engine has loaded" in notifications(app)
        engine_may_load.set()
        # no flag flipped: the A/B's answer is its refusal of two identical arms, in the verdict line that stays
        await wait_until(pilot, lambda: "A/B: arms A and B are the same flags" in screen_text(app, "#compare-verdict"),
                         what="the A/B's answer")


async def test_fake_h100_device_and_memory_views():
    app = make_app(gpu=True)
    async with app.run_test(size=(110, 32)) as pilot:
        await wait_ready(pilot)
        await wait_until(pilot, lambda: app.pane("memory").last_telemetry is not None, what="a telemetry sample")
        await pilot.press("5")
        facts = screen_text(app, "#device-facts")
        assert "H100" in facts and "TFLOP/s" in facts
        assert "H100" in app.sub_title
        selector = app.main.query_one("#device-select")
        assert selector.display and selector.value == "cuda:0"  # a choice between the CPU and the GPU
        sample = app.pane("memory").last_telemetry[0]
        gpu = sample.gpus[0]
        bar = app.main.query_one("#mem-bar")
        assert bar.total == gpu.mem_total_bytes and bar.progress == gpu.mem_used_bytes
        assert f"{gpu.mem_total_bytes / GiB:.1f} GiB" in screen_text(app, "#mem-title")
        assert "reserved but not used by tensors: 2.0 GiB" in screen_text(app, "#mem-allocator")
        # cuDNN switches apply on a GPU; the CPU-only ones are disabled with a reason.
        assert not app.main.query_one("#flag-cudnn_benchmark").disabled
        assert app.main.query_one("#flag-mkldnn_enabled").disabled
        used_before = gpu.mem_used_bytes
        await pilot.press("e")
        await wait_until(pilot, lambda: app.pane("memory").last_release is not None, what="the release")
        await wait_until(pilot, lambda: app.pane("memory").last_telemetry[0].gpus[0].mem_used_bytes < used_before,
                         what="the drop in NVML used memory")
        assert used_before - app.pane("memory").last_telemetry[0].gpus[0].mem_used_bytes == 2 * GiB
        assert any("released" in t for t in notifications(app))


async def test_two_runs_are_compared_overlaid_and_the_baseline_can_change(tiny_app):
    async with tiny_app(size=(110, 32), warmup=2, iters=60) as pilot:
        app = pilot.app
        await pilot.press("r")
        await wait_until(pilot, lambda: app.session.runs.get(1).finished, what="run 1")
        await flip(pilot, "deterministic_algorithms")  # run 2 with another flag set
        await wait_until(pilot, lambda: app.session.runs.get(2) is not None and app.session.runs.get(2).finished,
                         what="run 2")
        await pilot.press("2")
        table = app.main.query_one("#compare-table")
        assert table.row_count == 2
        # a cell wrapped on a row's lines read as one line
        rows = [[" ".join(str(cell).split("\n")) for cell in table.get_row(str(i))] for i in (1, 2)]
        columns = [str(c.label) for c in table.columns.values()]
        speed = columns.index("speed-up")
        assert rows[0][speed] == "baseline" and rows[1][speed].endswith("x")
        one, two = app.session.runs.get(1), app.session.runs.get(2)
        assert float(rows[1][speed][:-1]) == pytest.approx(one.stats.p50_ms / two.stats.p50_ms, rel=0.01)
        setup = columns.index("setup vs baseline")
        # whole, with the thread count it ran on
        assert re.search(r"tests.tinymodels:tiny_cnn 1x3x32x32 float32 · eager · threads=\d+ \(default\)",
                         rows[0][setup])
        assert rows[1][setup] == "deterministic algos=on"  # against the baseline: only what differs
        overlay = app.main.query_one("#latency-overlay")
        await wait_until(pilot, lambda: overlay.has_plot and len(overlay._plot._datasets) == 2, what="overlay")
        assert [label.split()[0] for label in overlay._plot._labels] == ["#1", "#2"]  # legend entries
        # Make run 2 the baseline: run 1's speed-up becomes the inverse.
        table.focus()
        await pilot.press("down", "b")
        assert app.session.runs.baseline() is two
        rows = [[str(cell) for cell in table.get_row(str(i))] for i in (1, 2)]
        assert rows[1][speed] == "baseline" and rows[0][speed].endswith("x")


async def test_choosing_the_cpu_in_the_device_selector_switches_flags_and_memory_view():
    app = make_app(gpu=True)
    async with app.run_test(size=(110, 32)) as pilot:
        await wait_ready(pilot)
        await wait_until(pilot, lambda: app.pane("memory").last_telemetry is not None, what="a telemetry sample")
        assert app.session.device_kind() == "cuda" and app.session.gpu_index() == 0
        app.main.query_one("#device-select").value = "cpu"
        await wait_until(pilot, lambda: app.session.device == "cpu", what="the device choice")
        assert app.session.gpu_index() is None
        await wait_until(pilot, lambda: app.main.query_one("#flag-cudnn_benchmark").disabled
                         and not app.main.query_one("#flag-mkldnn_enabled").disabled, what="the CPU's switches")
        await pilot.press("5")
        assert "System RAM" in screen_text(app, "#mem-title")


async def test_device_cuda_on_a_box_without_one_says_so_and_the_cpu_can_be_chosen():
    """Never a silent fall-back: the header and a notification say the device is not there, a run on it fails
    with the engine's line, and choosing cpu in the Device tab makes the next run work."""
    app = make_app(device="cuda", model=TINY, autostart=True, warmup=0, iters=3)
    async with app.run_test(size=(110, 32)) as pilot:
        await wait_until(pilot, lambda: app.session.runs.get(1) is not None and app.session.runs.get(1).finished,
                         what="the run on cuda")
        assert app.session.runs.get(1).status == "failed" and "CUDA" in app.session.runs.get(1).error
        # The device probe and the run's failure come from two processes, in either order (seen under load).
        await wait_until(pilot, lambda: app.sub_title == "cuda: not available", what="the header's word")
        await wait_until(pilot, lambda: any("--device cuda: no CUDA device here" in text for text in notifications(app)),
                         what="the notification")
        select = app.main.query_one("#device-select")
        assert select.display and select.value == "cuda"
        select.value = "cpu"  # as the selector does when the user picks cpu
        await wait_until(pilot, lambda: app.session.device == "cpu", what="the device choice")
        await pilot.press("r")
        await wait_until(pilot, lambda: app.session.runs.get(2) is not None and app.session.runs.get(2).finished,
                         what="the run on the cpu")
        assert app.session.runs.get(2).status == "done" and app.session.runs.get(2).device == "cpu"


async def test_each_line_belongs_to_the_model_or_run_it_describes(tiny_app):
    """The lines that went stale: the status lines of Throughput and Profile name the chosen model, the
    determinism note names its model and goes when another is chosen, the run line says the input and dtype,
    the histogram does not say "press r" while a run is under way, and `x` takes the old verdict with it."""
    async with tiny_app(size=(110, 34), warmup=0, iters=4) as pilot:
        app = pilot.app
        assert TINY in screen_text(app, "#throughput-status") and "pick a model" not in screen_text(
            app, "#throughput-status")
        assert TINY in screen_text(app, "#profile-status")
        await pilot.press("d")
        await wait_until(pilot, lambda: "determinism of" in screen_text(app, "#run-note"), what="the check")
        assert TINY in screen_text(app, "#run-note")
        await pilot.press("r")
        await wait_until(pilot, lambda: app.session.runs.get(1) is not None and app.session.runs.get(1).finished,
                         what="the run")
        assert "tests.tinymodels:tiny_cnn 1x3x32x32 float32 on cpu" in screen_text(app, "#run-status")
        await pilot.press("2", "x")
        assert "runs cleared" in screen_text(app, "#compare-verdict")
        await choose_model(pilot, "tests.tinymodels:threads_probe", "3x32x32")
        assert screen_text(app, "#run-note") == ""


async def test_the_model_given_with_model_is_highlighted_in_the_list():
    app = make_app(model="resnet18")
    async with app.run_test(size=(110, 34)) as pilot:
        await wait_until(pilot, lambda: app.main.panes_mounted() and app.pane("picker").model == "resnet18",
                         what="the model chosen")
        listing = app.main.query_one("#model-list")
        assert listing.get_option_at_index(listing.highlighted).id == "resnet18"


async def test_the_histogram_says_what_a_run_under_way_is_doing_not_press_r(tiny_app):
    async with tiny_app(size=(110, 34), warmup=1_000_000, iters=5) as pilot:  # a warm-up that lasts
        app = pilot.app
        histogram = app.main.query_one("#latency-histogram")
        assert "press r" in histogram.empty_text
        await pilot.press("r")
        await wait_until(pilot, lambda: "warming up" in histogram.empty_text, what="the warm-up line")
        await pilot.press("c")
        await wait_until(pilot, lambda: app.session.runs.get(1).finished, what="the cancel")
        assert "press r" not in histogram.empty_text


async def test_compare_gives_no_speed_up_between_runs_that_are_not_like_for_like(tiny_app):
    """Another input is not a flag: its row says what differs, and its speed-up says why there is none."""
    async with tiny_app(size=(110, 32), warmup=1, iters=10) as pilot:
        app = pilot.app
        await pilot.press("r")
        await wait_until(pilot, lambda: app.session.runs.get(1).finished, what="run 1")
        await choose_model(pilot, shape="3x16x16")
        await pilot.press("r")
        await wait_until(pilot, lambda: app.session.runs.get(2) is not None and app.session.runs.get(2).finished,
                         what="run 2")
        await pilot.press("2")
        table = app.main.query_one("#compare-table")
        columns = [str(c.label) for c in table.columns.values()]
        # the baseline is the newest run's oldest like-for-like run (#2 itself): #1 says what differs from it
        assert app.session.runs.baseline().run_id == 2
        row = [str(cell) for cell in table.get_row("1")]
        assert row[columns.index("speed-up")] == "n/a: input"
        assert row[columns.index("setup vs baseline")].startswith("1x3x32x32 float32")
        overlay = app.main.query_one("#latency-overlay")
        await wait_until(pilot, lambda: overlay.has_plot and overlay._plot._datasets, what="overlay")
        assert len(overlay._plot._datasets) == 1  # the input differs: nothing to overlay it with


async def test_h_hides_the_sidebar_for_the_tabs_and_brings_it_back(tiny_app):
    async with tiny_app(size=(80, 24)) as pilot:
        app = pilot.app
        tabs = app.main.query_one("#tabs")
        narrow = tabs.size.width
        await pilot.press("h")
        await wait_until(pilot, lambda: not app.main.query_one("#sidebar").display and tabs.size.width > narrow + 20,
                         what="the tabs widened")
        assert app.focused is not None and app.main.query_one("#sidebar") not in app.focused.ancestors
        await pilot.press("h")
        await wait_until(pilot, lambda: app.main.query_one("#sidebar").display and tabs.size.width == narrow,
                         what="the sidebar back")


def test_the_palette_offers_mark_filter_flags_and_the_sidebar():
    from torchperf_tui.app.commands import PALETTE

    actions = {action for _, _, action in PALETTE}
    assert {"mark_history_run", "screen.focus_filter", "screen.focus_flags", "screen.toggle_sidebar"} <= actions


async def test_the_run_stats_give_each_percentile_its_interval_and_mark_the_ones_the_run_cannot_support(tiny_app):
    async with tiny_app(size=(120, 40), warmup=0, iters=12) as pilot:
        app = pilot.app
        await run_and_wait(pilot)
        text = screen_text(app, "#run-stats")
        assert "p90 " in text and "?" in text.split("\n")[0]  # p90 and p99 of 12 samples are marked
        assert "95 % CI  p50 " in text and "p90? not supported by 12 samples, needs 54" in text
        assert "p99? not supported by 12 samples, needs 555" in app.main.query_one("#run-stats").tooltip
