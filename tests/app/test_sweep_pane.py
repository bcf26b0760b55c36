"""The Sweep tab: w sweeps the chosen model's sequence length under the current flags, W the flags before the last
flip against the current ones; rows stream in, then the summary and the two plots (latency and memory against
length, a line per arm). The measurement process answers the sweep with a recorded result."""

from __future__ import annotations

import math

from tests.app.helpers import flip, notifications, real_process, row_cells, screen_text, wait_until
from tests.fakes.fake_measurement import Failed, Recorded
from torchperf_tui.engine.measurements.sweep import SweepPoint, SweepResult


def recorded_sweep(arms=("",)) -> Recorded:
    points = []
    for i, length in enumerate((128, 256, 512)):
        for arm in arms:
            grow = 2 if arm == "B" else 4  # arm B's memory grows linearly, A's (and a lone arm's) quadratically
            points.append(SweepPoint(length, arm, True, median_ms=1.0 + i, p90_ms=1.5 + i,
                                     tokens_per_s=length * 1000 / (1.0 + i), peak_bytes=2**20 * grow ** i, iters=10))
    points.append(SweepPoint(1024, arms[0], False, reason="over the CPU memory cap: needs about 9 GiB"))
    result = SweepResult(model="hf:llama", device="cpu", dtype="float32", batch=1, lengths=[128, 256, 512, 1024],
                         arms=[(a, "threads=1" if a == "A" else "threads=2" if a == "B" else "threads=default")
                               for a in arms], points=points,
                         stop_reason=f"{'arm A: ' if arms[0] else ''}length 1024 does not fit: over the CPU memory cap",
                         memory_kind="rss", memory_cap_bytes=2**30, time_budget_s=120.0, duration_s=3.0)
    return Recorded(result, progress=tuple(("sweep_point", p) for p in points))


def plotted(app, selector: str) -> list[list[int]]:
    plot = app.main.query_one(selector)
    if not plot.has_plot:
        return []
    return [[round(2 ** x) for x in data.x] for data in plot._plot._datasets[::2]]  # a line, then its markers


async def test_w_sweeps_the_lengths_and_plots_latency_and_memory_against_them(tiny_app):
    from tests.fakes.fake_measurement import FakeMeasurement

    fake = FakeMeasurement({"sweep": recorded_sweep()}, real=real_process())
    async with tiny_app(measurement=fake, size=(120, 40)) as pilot:
        app = pilot.app
        await pilot.press("w")
        assert app.main.active_tab() == "sweep"
        await wait_until(pilot, lambda: "stopped:" in screen_text(app, "#sweep-summary"), what="the sweep's end")
        table = app.main.query_one("#sweep-table")
        cells = [row_cells(table, i) for i in range(table.row_count)]
        assert [row["length"] for row in cells] == ["128", "256", "512", "1024"]
        assert [cells[0][key] for key in ("p50", "p90", "rate", "peak")] == ["1.00 ms", "1.50 ms", "128,000", "1.0 MiB"]
        assert cells[-1]["p50"] == "does not fit" and "arm" not in cells[-1]  # a lone sweep has no arm column
        summary = screen_text(app, "#sweep-summary")
        assert "up to 512 tokens (3.00 ms p50, peak 16.0 MiB)" in summary
        assert "stopped: length 1024 does not fit" in summary
        for selector in ("#sweep-latency", "#sweep-memory"):
            await wait_until(pilot, lambda: plotted(app, selector) == [[128, 256, 512]], what=f"{selector}")
        params = next(p for kind, p in fake.requests if kind == "sweep")
        assert params["arms"] is None and params["seq_lens"] == (128, 4096) and params["cfg"].model == app.pane(
            "picker").model


async def test_shift_w_sweeps_the_flags_before_the_flip_against_now_and_overlays_their_curves(tiny_app):
    from tests.fakes.fake_measurement import FakeMeasurement

    fake = FakeMeasurement({"sweep": recorded_sweep(("A", "B"))}, real=real_process())
    async with tiny_app(measurement=fake, size=(120, 40)) as pilot:
        app = pilot.app
        await pilot.press("W")  # no flip yet: nothing to compare, said, and no job
        await wait_until(pilot, lambda: any("flip a flag first" in n for n in notifications(app)), what="refusal")
        assert not any(kind == "sweep" for kind, _ in fake.requests)
        await flip(pilot, "mkldnn_enabled")
        await pilot.press("W")
        await wait_until(pilot, lambda: "stopped:" in screen_text(app, "#sweep-summary"), what="the sweep's end")
        params = next(p for kind, p in fake.requests if kind == "sweep")
        a, b = params["arms"]
        assert a.flags.mkldnn_enabled != b.flags.mkldnn_enabled and params["seq_lens"] == (128, 4096)
        summary = screen_text(app, "#sweep-summary")
        assert "A: up to 512 tokens" in summary and "B: up to 512 tokens" in summary
        table = app.main.query_one("#sweep-table")
        assert [row_cells(table, i)["arm"] for i in range(2)] == ["A", "B"]
        await wait_until(pilot, lambda: plotted(app, "#sweep-memory") == [[128, 256, 512], [128, 256, 512]],
                         what="both arms' memory curves")
        memory = app.main.query_one("#sweep-memory")._plot._datasets
        assert list(memory[0].y) == [1, 4, 16] and list(memory[2].y) == [1, 2, 4]  # quadratic A, linear B


async def test_plots_short_of_rows_say_so_once_for_both_and_both_come_back_with_room(tiny_app):
    from tests.fakes.fake_measurement import FakeMeasurement

    fake = FakeMeasurement({"sweep": recorded_sweep(("A", "B"))}, real=real_process())
    async with tiny_app(measurement=fake, size=(80, 24)) as pilot:
        app = pilot.app
        await flip(pilot, "mkldnn_enabled")
        await pilot.press("W")
        await wait_until(pilot, lambda: "stopped:" in screen_text(app, "#sweep-summary"), what="the sweep's end")
        memory = app.main.query_one("#sweep-memory")
        note = "#sweep-latency .plot-placeholder"
        # 80x24 beside the sidebar: the table and summary leave the plots fewer rows than a plot needs
        await wait_until(pilot, lambda: screen_text(app, note).startswith(
            "the latency and memory plots need 7 rows, they have") and not memory.display, what="one note for both")
        await pilot.resize_terminal(120, 44)
        # A stress run once timed out here; what the panes then hold goes into the failure's message.
        await wait_until(pilot, lambda: memory.display and plotted(app, "#sweep-memory") == [[128, 256, 512]] * 2
                         and plotted(app, "#sweep-latency") == [[128, 256, 512]] * 2, what="both plots back",
                         shown=lambda: (f"memory shown {memory.display} at {memory.size}, its lengths "
                                        f"{plotted(app, '#sweep-memory')}, the latency plot's "
                                        f"{plotted(app, '#sweep-latency')}, the note {screen_text(app, note)!r}"))
        assert not app.main.query_one(note).display


async def test_a_refused_sweep_is_a_message_and_the_app_keeps_running(tiny_app):
    answers = {"sweep": Failed("sweep varies a token model's sequence length, and tests.tinymodels:tiny_cnn takes "
                               "1x3x32x32, not token ids: use bench --shapes for other inputs")}
    async with tiny_app(answers=answers) as pilot:
        app = pilot.app
        await pilot.press("w")
        await wait_until(pilot, lambda: "error:" in screen_text(app, "#sweep-status"), what="the refusal")
        assert "not token ids" in screen_text(app, "#sweep-status")
        assert any("not token ids" in n for n in notifications(app))
        await pilot.press("1")
        assert app.main.active_tab() == "timing"


async def test_a_length_measured_on_a_busy_host_is_marked_in_its_row_and_the_line_under_the_table_says_why(tiny_app):
    # Beside the sidebar at 80x24 the line of marks is below the fold: the row itself must say it is marked, as
    # Throughput's 'yes !' does. A walk under load showed five noisy lengths with nothing in their rows.
    from torchperf_tui.engine.hardware.host_noise import HostNoise

    recorded = recorded_sweep()
    busy = HostNoise(cores=2, load_start=6.0, load_end=7.0, window_s=3.0, other_busy_cores=1.5, slow_share=0.0,
                     samples=10)
    recorded.result.points[1].host_noise = busy  # length 256
    async with tiny_app(answers={"sweep": recorded}, size=(80, 24)) as pilot:
        app = pilot.app
        await pilot.press("w")
        await wait_until(pilot, lambda: "stopped:" in screen_text(app, "#sweep-summary"), what="the sweep's end")
        table = app.main.query_one("#sweep-table")
        lengths = [row_cells(table, i)["length"] for i in range(table.row_count)]
        assert lengths == ["128", "256 !", "512", "1024"]
        marks = [line for line in screen_text(app, "#sweep-summary").splitlines() if "disturbed" in line]
        assert marks and marks[0].startswith("! disturbed: length 256: noisy host"), marks
