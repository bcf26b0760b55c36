"""At 80x24, the size the README promises, every result is on screen whole: a line too long for the tab wraps or
moves to a second line (the roofline, the generation's figures, the timing modes), Kernels stacks what A and B ran
where they do not fit side by side, the sweep's memory column stays in sight, a plot without the rows for its data
says where to see it instead, and a disturbed run's histogram spans the bulk of its samples and counts the stalls
at its edge. The measurement process answers with recorded results (tests/app/small_screen_answers.py)."""

from __future__ import annotations

from tests.app.helpers import (column_in_sight, flip, in_sight, make_app, row_cells, screen_text, wait_ready,
                               wait_until)
from tests.app.recorded_answers import NOT_PLACED, TimedRuns, recorded_kernels
from tests.app.small_screen_answers import (SLOW, DisturbedRuns, recorded_generation, recorded_modes,
                                            recorded_roofline, recorded_throughput)
from tests.app.test_sweep_pane import recorded_sweep


def drawn(widget) -> str:
    """What `widget` draws, row after row, without the spaces (a line wrapped anywhere reads the same)."""
    return "".join("".join(widget.render_line(y).text.split()) for y in range(widget.size.height))


def whole(text: str) -> str:
    return "".join(text.split())


async def choose_tiny(pilot) -> None:
    from tests.app.helpers import choose_model

    await wait_ready(pilot)
    await choose_model(pilot, shape="3x32x32")


async def test_a_disturbed_runs_histogram_spans_its_bulk_the_stalls_said_at_its_edge_and_the_roofline_whole():
    app = make_app(answers={"time": DisturbedRuns(), "roofline": recorded_roofline})
    async with app.run_test(size=(80, 24)) as pilot:
        await choose_tiny(pilot)
        await pilot.press("r")
        roofline = app.main.query_one("#run-roofline")
        await wait_until(pilot, lambda: "intensity" in screen_text(app, "#run-roofline"), what="the roofline line")
        histogram = app.main.query_one("#latency-histogram")
        note = histogram.query_one(".plot-edge-note")
        await wait_until(pilot, lambda: note.display and "3 samples above" in screen_text(app, ".plot-edge-note"),
                         what="the stalls said at the histogram's edge")
        run = app.session.runs.get(1)
        bulk = [s for s in run.samples_ms if s not in SLOW.values()]
        assert screen_text(app, ".plot-edge-note") == f"3 samples above {max(bulk):.2f} ms, up to 704 ms →"
        await wait_until(pilot, lambda: in_sight(app, note) and whole(screen_text(app, ".plot-edge-note"))
                         in drawn(note), what="the edge note drawn in sight")  # its frame follows its text
        # The bars span the bulk (about 20-25 ms), not 20-704 ms with the bulk in one bar.
        bars = histogram._plot._datasets[0]
        assert min(bars.x) > min(bulk) - 1 and max(bars.x) < max(bulk) + 1
        assert sum(bars.y) == len(bulk) and sum(1 for count in bars.y if count) >= 3
        # The roofline: its whole text on screen, on two lines by design (wrapped further where they must). The line
        # is placed before it is laid out (one line, as at any width) and split once its width is known: a user sees
        # the split one; a test that reads it at once on a busy box can still find the first.
        await wait_until(pilot, lambda: "\n" in screen_text(app, "#run-roofline"), what="the roofline in two lines")
        text = screen_text(app, "#run-roofline")
        assert text.startswith("run #1 roofline: ") and "(11.2 % of the measured ceiling)" in text
        await wait_until(pilot, lambda: in_sight(app, roofline) and whole(text) == drawn(roofline),
                         what="the roofline line whole")


async def test_the_timing_modes_beside_a_run_wrap_and_the_histogram_says_where_it_went():
    app = make_app(answers={"time": DisturbedRuns(), "roofline": recorded_roofline, "modes": recorded_modes})
    async with app.run_test(size=(80, 24)) as pilot:
        await choose_tiny(pilot)
        await pilot.press("r")
        await wait_until(pilot, lambda: "intensity" in screen_text(app, "#run-roofline"), what="the roofline line")
        await pilot.press("M")
        await wait_until(pilot, lambda: app.pane("timing").last_modes is not None, what="the timing modes")
        modes = app.main.query_one("#run-modes")
        result = app.pane("timing").last_modes
        await wait_until(pilot, lambda: whole(result.findings[0]) in drawn(modes), what="the first gap whole")
        assert screen_text(app, "#run-modes").startswith("modes sync p50 ")
        # Beside the sidebar the run's lines leave the histogram too few rows: it says so, and where to look; the
        # lines and the notice overflow the tab, which scrolls to them rather than cut them.
        histogram = app.main.query_one("#latency-histogram")
        await wait_until(pilot, lambda: not histogram._plot.display, what="the histogram giving way")
        notice = screen_text(app, "#latency-histogram .plot-placeholder")
        assert notice.startswith("the histogram needs 7 rows") and "hide the sidebar (h)" in notice, notice
        app.pane("timing").scroll_end(animate=False)
        await wait_until(pilot, lambda: in_sight(app, histogram.query_one(".plot-placeholder")), what="the notice")
        assert whole(result.findings[0]) in drawn(modes)
        await pilot.press("h")  # the tab's full width: the lines take fewer rows and the bars come back
        await wait_until(pilot, lambda: histogram._plot.display and in_sight(app, histogram._plot),
                         what="the histogram drawn")
        for selector in ("#run-roofline", "#run-modes"):
            widget = app.main.query_one(selector)
            assert in_sight(app, widget) and whole(screen_text(app, selector)) == drawn(widget), selector


async def test_the_generation_summary_is_whole_beside_the_sidebar():
    app = make_app(answers={"generate": recorded_generation})
    async with app.run_test(size=(80, 24)) as pilot:
        await choose_tiny(pilot)
        await pilot.press("g")
        view = app.main.query_one("#generation")
        await wait_until(pilot, lambda: view.result is not None, what="the generation")
        lines = app.main.query_one("#generation-lines")
        text = screen_text(app, "#generation-lines")
        assert "TTFT 45.20 ms" in text and "KV cache 4.5 MiB" in text and "tokens/s" in text
        assert "decode reads 500.6 MB/token · 40.7 GB/s · MBU 32.0 % of the 127.3 GB/s copy ceiling" in text
        await wait_until(pilot, lambda: in_sight(app, lines) and whole(text) == drawn(lines),
                         what="the generation's lines whole")
        assert "greedy" not in text  # the method, too long for the short tab, is the CLI's and the record's
        histogram = app.main.query_one("#generation-histogram")
        await wait_until(pilot, lambda: histogram.has_plot and histogram._plot.display
                         and in_sight(app, histogram._plot), what="its histogram drawn")


async def test_a_generation_with_long_model_args_keeps_its_histogram_at_80x24():
    # The H200's demo at 80x24: a llama's overrides took five lines of the head and the histogram had no room.
    from torchperf_tui.app.demo_attention import SMALL_CONFIGS

    args = SMALL_CONFIGS["hf:llama"]
    app = make_app(answers={"generate": recorded_generation}, model="hf:llama", model_args=args, seq_len="64")
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_ready(pilot)
        await wait_until(pilot, lambda: "params" in screen_text(app, "#model-summary"), what="the llama analysed")
        await pilot.press("g")
        view = app.main.query_one("#generation")
        await wait_until(pilot, lambda: view.result is not None, what="the generation")
        text = screen_text(app, "#generation-lines")
        assert text.startswith("generate hf:llama · 64 new tokens after 1x64 float32") and args not in text, text
        histogram = app.main.query_one("#generation-histogram")
        await wait_until(pilot, lambda: histogram.has_plot and histogram._plot.display
                         and in_sight(app, histogram._plot), what="its histogram drawn")
        await pilot.resize_terminal(140, 44)  # room: the head says the overrides again
        await wait_until(pilot, lambda: args in screen_text(app, "#generation-lines"), what="the whole head")


async def test_the_sweeps_memory_and_tokens_per_s_are_in_sight_beside_the_sidebar_and_p90_said():
    app = make_app(answers={"sweep": recorded_sweep()})
    async with app.run_test(size=(80, 24)) as pilot:
        await choose_tiny(pilot)
        await pilot.press("w")
        await wait_until(pilot, lambda: "stopped:" in screen_text(app, "#sweep-summary"), what="the sweep's end")
        table = app.main.query_one("#sweep-table")
        # tokens/s was cut at 80 columns: the memory and tokens/s in sight, p90 said to be a key away
        await wait_until(pilot, lambda: "rate" in table.columns and column_in_sight(table, "rate"),
                         what="the memory and tokens/s columns in sight")
        assert [row_cells(table, i)["peak"] for i in range(3)] == ["1.0 MiB", "4.0 MiB", "16.0 MiB"]
        assert "16.0MiB" in drawn(table)  # drawn, not only held
        summary = app.main.query_one("#sweep-summary")
        await wait_until(pilot, lambda: "p90: h hides the sidebar" in screen_text(app, "#sweep-summary"),
                         what="where p90 is")
        assert in_sight(app, summary) and whole(screen_text(app, "#sweep-summary")) == drawn(summary)
        await pilot.press("h")
        await wait_until(pilot, lambda: "p90" in table.columns and column_in_sight(table, "p90"),
                         what="the p90 column in sight with h")
        assert "p90: h" not in screen_text(app, "#sweep-summary")


def kernels_app(kernels):
    """The fake H100 app whose kernel profile is answered by `kernels` (recorded_kernels)."""
    return make_app(gpu=True, answers={"kernels": kernels, "time": TimedRuns(device="cuda:0"), "roofline": NOT_PLACED})


async def profile_kernels(pilot):
    """A flag flipped, the tiny model chosen and k pressed, as a user does; -> the pane once its profile is in."""
    await wait_ready(pilot)
    await flip(pilot, "cudnn_benchmark")
    await choose_tiny(pilot)
    await pilot.press("k")
    pane = pilot.app.main.query_one("KernelsPane")
    await wait_until(pilot, lambda: pane.result is not None, what="the kernel profile")
    return pane


async def test_kernels_shows_what_a_and_b_ran_stacked_beside_the_sidebar_and_with_h():
    app = kernels_app(recorded_kernels(attention=True))
    async with app.run_test(size=(80, 24)) as pilot:
        pane = await profile_kernels(pilot)
        table = app.main.query_one("#kernels-table")
        for hidden in (False, True):
            await wait_until(pilot, lambda: "ran" in table.columns and column_in_sight(table, "ran"),
                             what="A ran / B ran in sight")
            # The table keeps room for its header and two layers (two lines each) beside the sidebar: the lines
            # above and below it wrap at this width, and a new user saw one layer of resnet18's twenty. What does
            # not fit is reached by scrolling the pane.
            assert table.size.height >= 6, table.size.height
            if not hidden:  # however long the lines around it: a note of ten lines at this width
                note = app.main.query_one("#kernels-note")
                text = str(note.render())
                note.update("a long note " * 40)
                await pilot.pause(0.2)
                assert table.size.height >= 6, table.size.height
                note.update(text)
                await wait_until(pilot, lambda: table.size.height > 6, what="the table's room back")
            for i, layer in enumerate(pane.result.layers):
                cells = row_cells(table, i)
                a_ran, b_ran = cells["ran"].split("\n")
                assert ("changed" if layer.changed else "same") in cells["layer"].split("\n")[1]  # markup around
                assert (b_ran == "same") == (not layer.changed)
                # each kernel by a name of its own (the long ones shortened to the width), never cut by the edge
                assert a_ran and whole(a_ran) in drawn(table) and whole(b_ran) in drawn(table)
            if not hidden:
                # An attention site says changed or same under its name too, its kernels beside (the H200's
                # fallback view read "math" under a site's name, as if it were a layer's).
                sites = [row_cells(table, len(pane.result.layers) + i) for i in range(len(pane.result.attention))]
                unders = [cells["layer"].split("\n")[1].replace("[b $warning]", "").replace("[/]", "")
                          for cells in sites]
                assert unders == ["same", "changed"] and [cells["ran"] for cells in sites] == ["math\nmath*",
                                                                                               "math\nflash"]
                await pilot.press("h")
        # With the tab's full width the names are the pane's usual short names, whole.
        assert row_cells(table, 1)["ran"] == "implicit_convolve_sgemm\nwinogradForwardData4x4"


async def test_kernels_times_of_a_disturbed_arm_are_marked_in_their_rows_and_said_above_the_fold():
    # At 80x24 beside the sidebar the note under the table is below the fold: a walk under load saw µs per layer
    # measured on a busy host with nothing in sight to say so. The disturbed arm's times carry the mark, and the line
    # above the table says what it is.
    from torchperf_tui.engine.hardware.host_noise import HostNoise

    busy = HostNoise(cores=2, load_start=6.0, load_end=7.0, window_s=3.0, other_busy_cores=1.5, samples=10,
                     during="its profiled passes")
    app = kernels_app(recorded_kernels(arm_hosts={"A": busy}))
    async with app.run_test(size=(80, 24)) as pilot:
        await profile_kernels(pilot)
        table = app.main.query_one("#kernels-table")
        await wait_until(pilot, lambda: "us" in table.columns and table.row_count == 4, what="the rows")
        for i in range(table.row_count):
            a_us, b_us = row_cells(table, i)["us"].split("\n")
            assert a_us.startswith("A ") and a_us.endswith(" !") and not b_us.endswith("!"), (a_us, b_us)
        summary = app.main.query_one("#kernels-summary")
        lines = screen_text(app, "#kernels-summary").splitlines()
        assert lines[-1] == "! disturbed: arm A: noisy host", lines
        await wait_until(pilot, lambda: in_sight(app, summary) and whole(lines[-1]) in drawn(summary),
                         what="the marks above the table in sight")
        assert "arm A: noisy host: " in screen_text(app, "#kernels-note")  # whole under the table


async def test_compares_table_shows_whole_columns_beside_the_sidebar_and_names_the_rest_then_all_with_h():
    # A walk at 80x24 saw the setup column cut at the table's edge ('tests.') and FPS and status out of sight, with
    # nothing to say they were there: the columns that do not fit give way, and the line under the table names them.
    from tests.app.helpers import run_and_wait

    app = make_app(answers={"time": TimedRuns(), "roofline": NOT_PLACED})
    async with app.run_test(size=(80, 24)) as pilot:
        await choose_tiny(pilot)
        await run_and_wait(pilot)
        await flip(pilot, "mkldnn_enabled")  # run #2 starts on the flip
        await wait_until(pilot, lambda: app.session.runs.get(2) is not None and app.session.runs.get(2).finished,
                         what="run #2")
        await pilot.press("escape", "2")
        table = app.main.query_one("#compare-table")
        legend = app.main.query_one("#compare-legend")
        keys = ["run", "median", "speedup", "p99", "setup", "fps", "status"]
        for hidden in (False, True):
            await wait_until(pilot, lambda: table.row_count == 2 and all(column_in_sight(table, key.value)
                                                                         for key in table.columns),
                             what="every column shown whole")
            shown = [key.value for key in table.columns]
            assert shown == keys[:len(shown)] and "speedup" in shown, shown
            assert row_cells(table, 1)["speedup"].endswith("x")
            where = [line for line in screen_text(app, "#compare-legend").splitlines() if not line.startswith("?")]
            if not hidden:
                assert shown == keys[:4], shown
                assert where == ["setup vs baseline, FPS at p50, status: h hides the sidebar"], where
                await wait_until(pilot, lambda: in_sight(app, legend), what="where the rest is, in sight")
                await pilot.press("h")
            else:
                # The tab's full width: the setup, wrapped in what is left, and the line says what is not shown and
                # that the sidebar is not what hides it.
                assert shown == keys[:5], shown
                assert row_cells(table, 1)["setup"].startswith("oneDNN")
                assert len(row_cells(table, 0)["setup"].split("\n")) > 1
                assert where == ["FPS at p50, status: a wider terminal shows them"], where
        # Four runs more: rows of wrapped setups overflow the table's ten rows, and its scrollbar takes two columns:
        # the columns shown are still whole beside it.
        await pilot.press("1")
        for run_id in (3, 4, 5, 6):
            await run_and_wait(pilot, run_id)
        await pilot.press("2")
        await wait_until(pilot, lambda: table.row_count == 6 and table.virtual_size.height > table.size.height
                         and all(column_in_sight(table, key.value) for key in table.columns),
                         what="six runs, the table scrolling, every column shown whole")
        assert [key.value for key in table.columns] == keys[:5]


async def test_the_throughput_plot_without_room_says_where_to_see_it():
    app = make_app(answers={"throughput": recorded_throughput})
    async with app.run_test(size=(80, 24)) as pilot:
        await choose_tiny(pilot)
        await pilot.press("t")
        await wait_until(pilot, lambda: "largest batch" in screen_text(app, "#throughput-summary"),
                         what="the search")
        # Beside the sidebar the search's lines leave the plot no room: it says so; the tab scrolls to it.
        plot = app.main.query_one("#throughput-plot")
        notice = plot.query_one(".plot-placeholder")
        await wait_until(pilot, lambda: plot.has_plot and not plot._plot.display and notice.display,
                         what="the notice")
        text = screen_text(app, "#throughput-plot .plot-placeholder")
        assert text.startswith("the plot of latency against throughput") and "h or a taller terminal" in text, text
        app.pane("throughput").scroll_end(animate=False)
        await wait_until(pilot, lambda: in_sight(app, notice) and whole(text) == drawn(notice), what="it in sight")
        # The summary says why batch 256 did not fit (the table says only that it did not).
        summary = app.main.query_one("#throughput-summary")
        assert "batch 256 does not fit: over the CPU memory cap: needs about 9 GiB" in screen_text(
            app, "#throughput-summary")
        assert whole(screen_text(app, "#throughput-summary")) == drawn(summary)
        table = app.main.query_one("#throughput-table")
        assert all(column_in_sight(table, key) for key in ("batch", "rate", "latency", "fits"))
        await pilot.press("h")  # the tab's full width: the lines take fewer rows, the plot its 7, every column
        await wait_until(pilot, lambda: plot._plot.display and not notice.display and in_sight(app, plot._plot)
                         and in_sight(app, summary), what="the plot drawn")
        assert all(column_in_sight(table, key) for key in ("batch", "rate", "latency", "fits", "phase", "took"))
