"""SVG snapshots of the main screen (pytest-textual-snapshot): a CPU box and a fake H100.

Deterministic by construction: a fixed DeviceReport (CPU facts pinned), a frozen telemetry source, no periodic
polling, text cursors not blinking, and no timing in a snapshot: the keys a user presses (r, a, k, a flag's switch)
are answered by a fake measurement process with recorded results (tests/app/recorded_answers.py), the model's
catalogue and analysis by the real one. Update with --snapshot-update.
"""

from __future__ import annotations

from typing import Any, Callable

from tests.app.helpers import (choose_model, flip, make_app, pick_listed, run_and_wait, screen_text, toasts_gone,
                               wait_ready, wait_until)
from tests.app.recorded_answers import NOT_PLACED, TimedRuns, recorded_ab, recorded_kernels


def press_then_settle(*keys: str, shown: Callable[[Any], bool] | None = None):
    """Once ready, `keys` pressed, and (`shown`) what they show in sight, then the screen still."""
    async def run_before(pilot) -> None:
        await wait_ready(pilot)
        await wait_until(pilot, lambda: pilot.app.pane("memory").last_telemetry is not None, what="the frozen sample")
        for field in pilot.app.query("Input"):
            field.cursor_blink = False
        await pilot.press(*keys)
        if shown is not None:
            await wait_until(pilot, lambda: shown(pilot.app), what=f"what {' '.join(keys)} shows")
        await pilot.wait_for_scheduled_animations()
        # Charts redraw at most once a second; let the last one land, and the Tabs underline settle.
        await pilot.pause(1.2)
        await pilot.wait_for_scheduled_animations()

    return run_before


class TestCpuBox:
    """On a box without CUDA: the picker, the flags (CUDA ones disabled with the reason), the panes."""

    def test_main_screen_80x24(self, snap_compare):
        """The first screen a user sees over SSH in a small terminal."""
        assert snap_compare(make_app(frozen=True), terminal_size=(80, 24), run_before=press_then_settle())

    def test_device_tab_says_why_there_is_no_cuda(self, snap_compare):
        """The device tab shows the CPU facts and a plain line that no CUDA device / NVML was found."""
        assert snap_compare(make_app(frozen=True), terminal_size=(100, 30), run_before=press_then_settle("4"))

    def test_memory_tab_shows_rss_and_ram(self, snap_compare):
        """On the CPU the memory tab shows system RAM as a bar and this process's RSS over time (the chart is
        redrawn at most every 2 s: the snapshot waits for it to show the samples, however busy the box)."""
        assert snap_compare(make_app(frozen=True), terminal_size=(100, 30),
                            run_before=press_then_settle("5", shown=memory_chart_drawn))


class TestFakeH100:
    """With the fake NVML / CUDA seams: an H100's facts, peaks and memory."""

    def test_device_tab(self, snap_compare):
        """GPU name, SMs, clocks, peak FLOPS and bandwidth with their formulas; CUDA flags enabled."""
        assert snap_compare(make_app(gpu=True, frozen=True), terminal_size=(110, 32), run_before=press_then_settle("4"))

    def test_memory_tab(self, snap_compare):
        """NVML used/total as a bar and a chart, utilisation, temperature, power and the allocator's gap."""
        assert snap_compare(make_app(gpu=True, frozen=True), terminal_size=(110, 32), run_before=press_then_settle("5"))


def user_compares(key: str, shown: Callable[[Any], bool]):
    """press_then_settle, then what a user does for an A/B (`a`) or a kernel view (`k`) of resnet50: flip
    cudnn.benchmark (before a model is chosen, so the flip starts no run), pick the model from the list, press
    `key`; the fake measurement process answers with its recorded result, and the snapshot waits until `shown(app)`
    and the toasts have gone."""
    async def run_before(pilot) -> None:
        await press_then_settle()(pilot)
        await flip(pilot, "cudnn_benchmark")
        await pick_listed(pilot, "resnet50")
        await settle(pilot, key, lambda: shown(pilot.app))

    return run_before


async def settle(pilot, key: str, shown: Callable[[], bool]) -> None:
    """Text cursors still, `key` pressed, then what it shows in sight, the toasts gone and the charts redrawn."""
    for field in pilot.app.query("Input"):
        field.cursor_blink = False
    if key:
        await pilot.press(key)
    await wait_until(pilot, shown, what=f"what {key or 'the screen'} shows")
    await toasts_gone(pilot)
    await pilot.wait_for_scheduled_animations()
    # Charts redraw at most once a second; let the last one land, and the Tabs underline settle.
    await pilot.pause(1.2)
    await pilot.wait_for_scheduled_animations()


def memory_chart_drawn(app) -> bool:
    """The Memory tab's chart shows its samples: its plot in sight, not the "collecting samples" placeholder."""
    chart = app.main.query_one("#mem-chart")
    return (chart.has_plot and chart.has_data() and not chart.query_one(".plot-placeholder").display
            and chart.query_one("ExitSafePlot").display)


def verdict_shown(app) -> bool:
    return "B is" in screen_text(app, "#compare-verdict")


def kernels_shown(app) -> bool:
    return "conv layers changed" in screen_text(app, "#kernels-summary")


class TestTradeOffs:
    """Issue 6's views on the fake H100, filled with recorded results (no timing in a snapshot)."""

    def test_compare_view_with_a_verdict(self, snap_compare):
        """A vs B with each arm's median and CI, the verdict line, the table and both histograms overlaid."""
        app = make_app(gpu=True, frozen=True, answers={"ab": recorded_ab()})
        assert snap_compare(app, terminal_size=(110, 32), run_before=user_compares("a", verdict_shown))

    def test_kernel_table(self, snap_compare):
        """Per conv layer: the kernel under A and under B with its time; changed layers marked."""
        app = make_app(gpu=True, frozen=True, answers={"kernels": recorded_kernels()})
        assert snap_compare(app, terminal_size=(110, 32), run_before=user_compares("k", kernels_shown))


async def timed_runs(pilot, *flips: str) -> None:
    """r, then a flip of each flag in `flips` (a flip starts a new run), each run answered by the fake measurement
    process (TimedRuns) and finished before the next key."""
    app = pilot.app
    await run_and_wait(pilot)
    for run_id, name in enumerate(flips, start=2):
        await flip(pilot, name)
        await wait_until(pilot, lambda run_id=run_id: app.session.runs.get(run_id) is not None
                         and app.session.runs.get(run_id).finished, what=f"run #{run_id} to finish")


def with_tiny_model(keys=None, key: str = "", shown: Callable[[Any], bool] = lambda app: True):
    """press_then_settle, the tiny model chosen as a user types it, then `keys(pilot)` (what a user presses) and
    `key`, until `shown(app)`."""
    async def run_before(pilot) -> None:
        await press_then_settle()(pilot)
        await choose_model(pilot, shape="3x32x32")
        if keys is not None:
            await keys(pilot)
        await settle(pilot, key, lambda: shown(pilot.app))

    return run_before


def timing_app():
    """The CPU snapshot app whose timing runs are answered with recorded ones (their rooflines not placed)."""
    return make_app(frozen=True, answers={"time": TimedRuns(), "roofline": NOT_PLACED})


def history_file() -> str:
    """A history of four saved runs of three models with pinned ids and dates, at a fixed path (the History tab
    shows it). Written beside it and renamed over it, never removed first: another run of the suite on the same
    box (or another xdist worker) may be reading it at that moment."""
    import os
    import tempfile
    from pathlib import Path

    from tests.records import make_record
    from torchperf_tui.engine.records.history_file import HistoryFile

    folder = Path(tempfile.gettempdir()) / "torchperf-snapshot-history"
    folder.mkdir(exist_ok=True)
    path = folder / "history.jsonl"
    handle, fresh = tempfile.mkstemp(dir=folder, prefix=".history.", suffix=".tmp")
    os.close(handle)
    records = []
    for i, (model, p50, flags) in enumerate((("resnet18", 21.0, {}), ("resnet18", 19.5, {"mkldnn_enabled": False}),
                                             ("mobilenet_v3_small", 6.2, {}), ("vit_b_16", 88.0, {}))):
        record = make_record(p50, p50 * 1.6, model=model, record_id=f"r{i:07d}")
        if flags:
            record.flags = {**record.flags, **flags}
            record.flags_text = ", ".join(f"{k}={v}" for k, v in flags.items())
        records.append(record)
    HistoryFile(fresh).extend(records)  # appended to the empty file
    os.replace(fresh, path)
    return str(path)


class TestAt80x24:
    """The views the README promises at 80x24, the sidebar shown: Timing, Compare, Layers and History."""

    def test_timing_after_a_run(self, snap_compare):
        """The run's lines one row each and a histogram that keeps its bars."""
        assert snap_compare(timing_app(), terminal_size=(80, 24), run_before=with_tiny_model(timed_runs))

    def test_compare_two_runs(self, snap_compare):
        """Two runs like for like: the speed-up in sight, the overlay with its series named on its caption."""
        def two_runs(pilot):
            return timed_runs(pilot, "mkldnn_enabled")

        assert snap_compare(timing_app(), terminal_size=(80, 24), run_before=with_tiny_model(two_runs, key="2"))

    def test_layers_of_a_model(self, snap_compare):
        """The tiny model's layer table with FLOPs in sight."""
        assert snap_compare(make_app(frozen=True), terminal_size=(80, 24), run_before=with_tiny_model(key="3"))

    def test_history_with_models(self, snap_compare):
        """Saved runs with their model in sight."""
        app = make_app(frozen=True, history_path=history_file())
        assert snap_compare(app, terminal_size=(80, 24), run_before=press_then_settle("8"))
