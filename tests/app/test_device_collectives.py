"""The Device tab's collectives (key L): the CLI's spec (its device and world left to the measurement process), a row
per collective and size as each is timed, then the run's rows, one table (busbw = algbw x nccl-tests' factor, its share
of the link's peak where there is one) and busbw against message size plotted, a curve per collective and the peak
across them; c and a new L cancel it cleanly, a failure is one line, and at 80x24 beside the sidebar every part is whole
on screen. The measurement process answers with recorded runs (tests/app/recorded_answers.py), but for one test that
runs two gloo ranks on this CPU."""

from __future__ import annotations

import pytest

from tests.app.helpers import (column_in_sight, in_sight, make_app, notifications, real_process, row_cells, screen_text,
                               wait_ready, wait_until)
from tests.app.recorded_answers import recorded_collectives
from tests.fakes.fake_measurement import Failed, FakeMeasurement, Recorded
from torchperf_tui.app.widgets.device.collectives_view import APP_SIZES
from torchperf_tui.engine.measurements.collectives import CollectivesSpec, bus_factor, parse_sizes

SIZES = ["16.0 KiB", "64.0 KiB", "256.0 KiB", "1.0 MiB", "4.0 MiB"]


def status(app) -> str:
    return " ".join(screen_text(app, "#collectives-status").split())


def rows(app) -> list[dict[str, str]]:
    table = app.main.query_one("#collectives-table")
    return [row_cells(table, i) for i in range(table.row_count)]


def keys(table) -> list[str]:
    """The table's columns, as their keys."""
    return [key.value for key in table.columns]


def curves(app) -> list[list[int]]:
    """The sizes of each line drawn (a curve's line, then its markers; the peak's line last, across the plot)."""
    plot = app.main.query_one("#collectives-plot")
    if not plot.has_plot or not plot.query_one("ExitSafePlot").display:
        return []
    return [[round(2 ** x) for x in data.x] for data in plot._plot._datasets[::2]]


def legend(app) -> str:
    """The words under the plot."""
    return " ".join(screen_text(app, "#collectives-plot .plot-legend").split())


def drawn(widget) -> str:
    """What `widget` draws, row after row, without the spaces (a line wrapped anywhere reads the same)."""
    return "".join("".join(widget.render_line(y).text.split()) for y in range(widget.size.height))


async def test_l_runs_the_clis_spec_and_shows_the_table_the_plot_and_the_rows():
    fake = FakeMeasurement({"collectives": recorded_collectives()}, real=real_process())
    app = make_app(measurement=fake)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_ready(pilot)
        assert "Press L to time all_reduce, all_gather, reduce_scatter" in status(app)
        await pilot.press("L")
        assert app.main.active_tab() == "device"
        await wait_until(pilot, lambda: "done in 6.4 s" in status(app), what="the run's end", shown=lambda: status(app))
        # The CLI's spec at the app's sizes: the device and the world are chosen where torch is, as for the CLI.
        spec = next(params["spec"] for kind, params in fake.requests if kind == "collectives")
        assert spec == CollectivesSpec(sizes=parse_sizes(APP_SIZES)) and (spec.world, spec.device) == (None, "auto")
        assert status(app) == "Collectives across 4 ranks on GPUs (NCCL), float32 · done in 6.4 s"
        table = rows(app)
        ops = ("all_reduce", "all_gather", "reduce_scatter")
        assert [(row["op"], row["size"]) for row in table] == [(op, size) for op in ops for size in SIZES]
        assert list(table[0]) == ["op", "size", "time", "algbw", "busbw", "peak"]
        assert [row["busbw"] for row in table[:5]] == ["3.0", "12.0", "30.0", "60.0", "150.0"]  # algbw x 2(4-1)/4
        for row in table:
            assert float(row["busbw"]) == pytest.approx(float(row["algbw"]) * bus_factor(row["op"], 4)), row
        assert (table[4]["time"], table[4]["peak"]) == ("42 µs", "33.3")  # 4 MiB at 100 GB/s; 150 of 450 GB/s
        sizes = [2**14 * 4**k for k in range(5)]
        await wait_until(pilot, lambda: curves(app)[:3] == [sizes] * 3 and len(curves(app)) == 4,
                         what="three curves and the peak", shown=lambda: curves(app))
        assert list(app.main.query_one("#collectives-plot")._plot._datasets[-1].y) == [450.0, 450.0]
        assert legend(app) == "■ all_reduce ■ all_gather ■ reduce_scatter ─ the link's peak, 450.0 GB/s each way per GPU"
        facts = " ".join(screen_text(app, "#collectives-rows").split())
        assert "ranks: 4, one process each (torch.multiprocessing), on cuda:0 (NVIDIA H100 80GB HBM3), cuda:1" in facts
        assert "link's peak: 450.0 GB/s each way per GPU (NVLink 18 links)" in facts
        assert "busbw: busbw = algbw x 2(n-1)/n for all_reduce" in " ".join(
            screen_text(app, "#collectives-definitions").split())
        assert not app.main.query_one("#collectives-elsewhere").display  # every column has room


async def test_the_cpu_chosen_in_the_device_selector_runs_the_ranks_on_the_cpu():
    """On a GPU box with the CPU chosen, L runs gloo across processes, as `collectives --device cpu` does; back on a
    GPU the choice is the measurement process's again (NCCL across the GPUs)."""
    fake = FakeMeasurement({"collectives": recorded_collectives()}, real=real_process())
    app = make_app(gpu=True, measurement=fake)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_ready(pilot)
        assert "across the box's GPUs (NCCL) where it has two or more" in status(app)  # a GPU box, nothing chosen
        app.main.query_one("#device-select").value = "cpu"
        await wait_until(pilot, lambda: app.session.device == "cpu", what="the device choice")
        # before the run, the section says where L runs now: not across the box's GPUs
        await wait_until(pilot, lambda: "across 2 processes on the CPU (gloo), the device chosen" in status(app),
                         what="where L runs now", shown=lambda: status(app))
        assert "GPUs" not in status(app)
        await pilot.press("L")
        await wait_until(pilot, lambda: "done in" in status(app), what="the run's end", shown=lambda: status(app))
        app.main.query_one("#device-select").value = "cuda:0"
        await wait_until(pilot, lambda: app.session.device == "cuda:0", what="the GPU chosen again")
        await pilot.press("L")
        await wait_until(pilot, lambda: len([k for k, _ in fake.requests if k == "collectives"]) == 2
                         and "done in" in status(app), what="the second run's end", shown=lambda: status(app))
        specs = [params["spec"] for kind, params in fake.requests if kind == "collectives"]
        assert [spec.device for spec in specs] == ["cpu", "auto"]


async def test_rows_arrive_as_the_sizes_are_timed_and_c_or_a_new_l_cancels_cleanly():
    answer = recorded_collectives(world=2, device="cpu", peak_gbs=None, held=True, ops=("all_reduce",))
    fake = FakeMeasurement({"collectives": answer}, real=real_process())
    app = make_app(measurement=fake)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_ready(pilot)
        # a box without CUDA: before the run the section says the ranks are processes on the CPU, not GPUs
        await wait_until(pilot, lambda: "across 2 processes on the CPU (gloo), no CUDA device here" in status(app),
                         what="where L runs on this box", shown=lambda: status(app))
        assert "GPUs" not in status(app)
        await pilot.press("L")
        await wait_until(pilot, lambda: len(rows(app)) == 5 and curves(app) == [[2**14 * 4**k for k in range(5)]],
                         what="all_reduce's rows and curve while it runs", shown=lambda: status(app))
        assert status(app) == ("Collectives: running all_reduce, all_gather, reduce_scatter across processes… "
                               "latest: all_reduce 4.0 MiB: 42 µs, algbw 100.0 GB/s, busbw 100.0 GB/s")
        assert [row["busbw"] for row in rows(app)] == ["2.0", "8.0", "20.0", "40.0", "100.0"]  # x 2(2-1)/2
        assert "peak" not in rows(app)[0]  # none known while it runs on the CPU
        assert [job.kind for job in app.session.measuring()] == ["collectives"]
        await pilot.press("c")
        await wait_until(pilot, lambda: "cancelled" in status(app), what="the cancel", shown=lambda: status(app))
        assert status(app) == "Collectives: cancelled: the sizes timed before it are below"
        assert len(rows(app)) == 5 and app.session.measuring() == []
        # L in flight replaces the run: the first is cancelled, its answer dropped, the second's rows shown
        await pilot.press("L")
        await wait_until(pilot, lambda: len(rows(app)) == 5 and "latest" in status(app), what="the second run's rows")
        first = app.session.measuring()[0].job_id
        await pilot.press("L")
        await wait_until(pilot, lambda: app.session.measuring() and app.session.measuring()[0].job_id != first
                         and len(rows(app)) == 5 and "latest" in status(app), what="the third run's rows",
                         shown=lambda: status(app))
        assert [kind for kind, _ in fake.requests].count("collectives") == 3
        assert len(app.session.measuring()) == 1 and status(app).startswith("Collectives: running")


async def test_a_run_cancelled_as_its_ranks_start_says_so_with_no_table():
    def cancelled_early(params):
        recorded = recorded_collectives(world=2, device="cpu", peak_gbs=None)(params)
        recorded.result.points, recorded.result.cancelled, recorded.result.seconds = [], True, 4.3
        return Recorded(recorded.result)

    app = make_app(answers={"collectives": cancelled_early})
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_ready(pilot)
        await pilot.press("L")
        await wait_until(pilot, lambda: "cancelled" in status(app), what="the cancelled run", shown=lambda: status(app))
        assert status(app) == "Collectives across 2 ranks on the CPU (gloo), float32 · cancelled after 4.3 s"
        assert "stopped: cancelled: the sizes timed before the cancel" in screen_text(app, "#collectives-rows")
        for empty in ("#collectives-table", "#collectives-plot", "#collectives-definitions", "#collectives-elsewhere"):
            assert not app.main.query_one(empty).display, empty


async def test_a_failed_run_is_one_line_and_the_app_keeps_running():
    error = "rank 1 failed during all_gather of 4.0 MiB: RuntimeError: Connection reset by peer"
    app = make_app(answers={"collectives": Failed(error)})
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_ready(pilot)
        await pilot.press("L")
        await wait_until(pilot, lambda: "error:" in status(app), what="the failure", shown=lambda: status(app))
        assert screen_text(app, "#collectives-status").strip().splitlines() == [f"Collectives: error: {error}"]
        assert error in notifications(app)
        assert not app.main.query_one("#collectives-table").display
        await pilot.press("1")
        assert app.main.active_tab() == "timing"


async def test_at_80x24_beside_the_sidebar_every_part_is_whole_and_the_columns_left_out_are_named():
    fake = FakeMeasurement({"collectives": recorded_collectives()}, real=real_process())
    app = make_app(measurement=fake)
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_ready(pilot)
        await pilot.press("L")
        await wait_until(pilot, lambda: "done in 6.4 s" in status(app), what="the run's end", shown=lambda: status(app))
        table = app.main.query_one("#collectives-table")
        # the table first, whole, its columns within its width; time and algbw give way to busbw and its share
        await wait_until(pilot, lambda: in_sight(app, table) and keys(table) == ["op", "size", "busbw", "peak"],
                         what="the whole table in sight", shown=lambda: keys(table))
        assert all(column_in_sight(table, key) for key in ("op", "size", "busbw", "peak"))
        elsewhere = app.main.query_one("#collectives-elsewhere")
        assert screen_text(app, "#collectives-elsewhere") == "time and algbw GB/s: h hides the sidebar"
        plot = app.main.query_one("#collectives-plot")
        names = plot.query_one(".plot-legend")
        for widget in (elsewhere, plot, names, app.main.query_one("#collectives-rows"),
                       app.main.query_one("#collectives-definitions")):
            widget.scroll_visible(animate=False)
            await wait_until(pilot, lambda: in_sight(app, widget), what=f"{widget} in sight")
        await wait_until(pilot, lambda: curves(app) and not plot.no_room, what="the plot drawn")
        for name in ("■all_reduce", "■all_gather", "■reduce_scatter", "thelink'speak,450.0GB/seachwayperGPU"):
            assert name in drawn(names)
        await pilot.press("h")  # the sidebar hidden: every column comes back, and the line goes
        await wait_until(pilot, lambda: keys(table) == ["op", "size", "time", "algbw", "busbw", "peak"]
                         and not elsewhere.display, what="every column", shown=lambda: keys(table))


async def test_two_gloo_ranks_on_this_cpu_end_to_end():
    app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_ready(pilot)
        await pilot.press("L")
        view = app.main.query_one("#device-collectives")
        await wait_until(pilot, lambda: view.result is not None or view.error is not None, timeout=300,
                         what="two ranks' collectives", shown=lambda: status(app))
        result = view.result
        assert result is not None and not result.cancelled, view.error
        assert (result.spec.world, result.spec.device, result.backend) == (2, "cpu", "gloo")
        assert status(app).startswith("Collectives across 2 ranks on the CPU (gloo), float32 · done in ")
        assert [(row["op"], row["size"]) for row in rows(app)] == [(op, size) for op in result.spec.ops
                                                                   for size in SIZES]
        for point in result.points:
            assert point.busbw_gbs == point.algbw_gbs * bus_factor(point.op, 2) > 0
        await wait_until(pilot, lambda: len(curves(app)) == 3 and "no link's peak" in legend(app),
                         what="a curve per collective, and why no peak is drawn", shown=lambda: legend(app))
        assert legend(app) == ("■ all_reduce ■ all_gather ■ reduce_scatter no link's peak to draw: the ranks ran on the "
                            "CPU")
        assert "link's peak: n/a: on the CPU" in " ".join(screen_text(app, "#collectives-rows").split())
