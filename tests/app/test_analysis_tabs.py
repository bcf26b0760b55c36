"""The Throughput, Profile and History tabs and the roofline line, driven with Pilot on the CPU with the
tiny model at 3x16x16 and few iterations."""

from __future__ import annotations

import os
import time

import torch
from torch import nn

from tests.app.helpers import (TINY, choose_model, flip, make_app, notifications, row_cells, screen_text, wait_ready,
                               wait_until)
from tests.tinymodels import TinyCNN
from torchperf_tui.app.screens.main import TABS
from torchperf_tui.core.formatting import format_number


def rows(app, selector: str) -> list[list[str]]:
    table = app.main.query_one(selector)
    return [[str(cell) for cell in table.get_row_at(i)] for i in range(table.row_count)]


async def test_number_keys_reach_every_tab_including_the_new_ones():
    app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_ready(pilot)
        for i, name in enumerate(TABS[:9]):  # the tenth, Sweep, is reached by its key w (tests/app/test_sweep_pane.py)
            await pilot.press(str(i + 1))
            assert app.main.active_tab() == name
        assert TABS[-6:] == ("throughput", "profile", "history", "kernels", "sweep", "why")


async def test_why_names_a_slow_layer_with_its_share_and_says_what_it_measured(tiny_app):
    async with tiny_app(spec="tests.tinymodels:slow_layer_net", shape="64", size=(110, 32), iters=10,
                        warmup=2) as pilot:
        app = pilot.app
        await pilot.press("y")
        assert app.main.active_tab() == "why"
        await wait_until(pilot, lambda: screen_text(app, "#why-status").startswith("why: "), timeout=180,
                         what="the findings", shown=lambda: screen_text(app, "#why-status"))
        text = screen_text(app, "#why-findings")
        assert "layer scale (SlowElementwise) takes" in text and "no option fixes it: the layer's own code" in text
        assert "gathered: timing: 10 iterations" in text and "against the previous why" not in text
        first = app.pane("why").result
        await pilot.press("y")  # again: said against the first, which findings appeared or went away
        await wait_until(pilot, lambda: app.pane("why").result is not first
                         and screen_text(app, "#why-status").startswith("why: "), timeout=180,
                         what="the second findings", shown=lambda: screen_text(app, "#why-status"))
        text = " ".join(screen_text(app, "#why-findings").split())
        assert text.startswith("against the previous why of this model and input (threads=")


async def test_throughput_search_streams_tries_then_shows_the_largest_batch_and_a_plot(tiny_app):
    # A model with a fixed cost per call, so each doubling doubles samples/s: with the tiny CNN alone, a busy box
    # made batch 8 look no better than 2 and the plateau rule stopped the search before the bound; at 10 ms a call
    # two CPU burners beside the suite still did (stopped at 4), so 50 ms.
    async with tiny_app(spec="tests.tinymodels:slow_per_call_cost", shape="3x16x16", size=(110, 32),
                        max_batch=16) as pilot:
        app = pilot.app
        await pilot.press("t")
        assert app.main.active_tab() == "throughput"
        await wait_until(pilot, lambda: "largest batch" in screen_text(app, "#throughput-summary"),
                         what="the search to finish")
        table = [row_cells(app.main.query_one("#throughput-table"), i)
                 for i in range(app.main.query_one("#throughput-table").row_count)]
        assert [r["batch"] for r in table[:5]] == ["1", "2", "4", "8", "16"]  # grown 1, 2, 4, ... to the bound
        assert all(r["fits"] in ("yes", "yes !") and r["rate"] != "–" and r["took"].endswith(" s") for r in table)
        assert table[-1]["phase"] == "measure"
        summary = screen_text(app, "#throughput-summary")
        # The best rate and its batch (the one measured last), how far the search went, why it stopped,
        # and the time spent against the budget.
        assert f"samples/s at batch {table[-1]['batch']}" in summary and summary.startswith("best ")
        assert "largest batch that fits: not searched past 16: stopped by max-batch" in summary
        assert "stopped by max-batch: stopped growing at the max-batch bound 16" in summary
        assert "s of the 120 s budget" in summary
        plot = app.main.query_one("#throughput-plot")
        # The frontier: each batch's median latency against its samples/s, the best batch marked.
        assert [batch for _, _, batch in plot.frontier] == [1, 2, 4, 8, 16]
        assert plot.chosen == int(table[-1]["batch"]) and plot.budget is None
        assert (plot.latency, plot.rate) == ("median", "samples/s")
        rates = {row["batch"]: row["rate"] for row in table if row["phase"] != "measure"}
        assert [format_number(x, digits=1) for x, _, _ in plot.frontier] == [rates[b] for b in ("1", "2", "4", "8", "16")]
        # The plot redraws at most every 0.25 s: an earlier redraw may show fewer batches; wait for the last.
        await wait_until(pilot, lambda: plot.has_plot and bool(plot._plot._datasets)
                         and len(plot._plot._datasets[0].x) == 5, what="the plot")


async def test_a_latency_budget_typed_in_throughput_finds_the_largest_batch_within_it_and_draws_the_frontier(tiny_app):
    async with tiny_app(spec="tests.tinymodels:tiny_cnn", shape="3x16x16", size=(110, 36), max_batch=4) as pilot:
        app = pilot.app
        await pilot.press("T")  # the tab, the cursor in the budget's field: typed, as a user types it
        field = app.main.query_one("#throughput-slo")
        assert app.main.active_tab() == "throughput" and field.has_focus
        await pilot.press("p", "9", "9", "enter")
        await wait_until(pilot, lambda: "write pQ=BUDGET with a unit" in screen_text(app, "#throughput-status"),
                         what="the budget's refusal")
        field.value = "p50=5s"  # p50 needs 9 passes a batch: quick on the tiny CNN, bounded at batch 4
        await pilot.press("enter")
        await wait_until(pilot, lambda: "largest batch within it: batch 4" in screen_text(app, "#throughput-summary"),
                         what="the batch chosen", shown=lambda: screen_text(app, "#throughput-summary"))
        table = app.main.query_one("#throughput-table")
        rows = [row_cells(table, i) for i in range(table.row_count)]
        assert [r["batch"] for r in rows] == ["1", "2", "4"] and [r["passes"] for r in rows] == ["9"] * 3
        assert rows[-1]["verdict"] == "meets, chosen" and str(table.columns["quantile"].label) == "p50"
        plot = app.main.query_one("#throughput-plot")
        assert [batch for _, _, batch in plot.frontier] == [1, 2, 4] and plot.chosen == 4
        assert plot.budget == ("p50", 5000.0)
        # one search typed while the other runs replaces it: the new one's table, rows and result alone
        await pilot.press("escape", "t")
        await wait_until(pilot, lambda: table.row_count > 0 and "samples/s" in
                         [str(c.label) for c in table.columns.values()], what="the samples/s search under way")
        await pilot.press("T")
        await pilot.press("enter")  # the field still holds p50=5s
        await wait_until(pilot, lambda: "largest batch within it: batch 4" in screen_text(app, "#throughput-summary"),
                         what="the budget's search after the replaced one")
        assert [str(c.label) for c in table.columns.values()] == ["batch", "p50", "items/s", "goodput/s", "passes",
                                                                   "verdict"]  # the quantile is p50: one column
        assert table.row_count == 3
        await pilot.press("escape", "t")  # and back: the samples/s search's own result
        await wait_until(pilot, lambda: screen_text(app, "#throughput-summary").startswith("best "),
                         what="the samples/s search's result")
        assert "samples/s" in [str(c.label) for c in table.columns.values()]
        assert plot.budget is None and (plot.latency, plot.rate) == ("median", "samples/s")


async def test_throughput_on_a_model_that_runs_out_of_memory_says_so_and_keeps_going(tiny_app):
    async with tiny_app(spec="tests.tinymodels:oom_model", shape="3x16x16", size=(110, 32), max_batch=16) as pilot:
        app = pilot.app
        await pilot.press("t")
        # No batch fitting is an error (one line), not a result without a rate.
        await wait_until(pilot, lambda: "even batch 1 does not fit" in screen_text(app, "#throughput-status"),
                         what="the search to end")
        assert "error:" in screen_text(app, "#throughput-status")
        assert "out of memory" in screen_text(app, "#throughput-status").lower()  # why, in the error's line
        table = app.main.query_one("#throughput-table")
        assert table.row_count and all(row_cells(table, i)["fits"] == "no" for i in range(table.row_count))
        assert screen_text(app, "#throughput-summary") == ""
        assert app.is_running


class SlowRising(TinyCNN):
    """A pass takes 20 ms + 1 ms per sample: samples/s rises with batch, so the search neither plateaus nor
    ends soon (about 11 s to the default bound 1024), and a test has time to cancel it."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        time.sleep(0.020 + 0.001 * x.shape[0])
        return super().forward(x)


def slow_rising() -> nn.Module:
    return SlowRising()


async def test_a_new_request_or_c_cancels_the_search_in_flight():
    app = make_app()  # the default bound (1024) and time budget (120 s)
    async with app.run_test(size=(110, 32)) as pilot:
        await wait_ready(pilot)
        # The tiny CNN's search now stops at its plateau in under a second: too soon to be cancelled.
        await choose_model(pilot, "tests.app.test_analysis_tabs:slow_rising", "3x16x16")
        await pilot.press("t")
        first = app.pane("throughput").jobs.job_id("throughput")
        await wait_until(pilot, lambda: app.main.query_one("#throughput-table").row_count >= 1, what="a try")
        assert any(j.job_id == first for j in app.session.measure.pending())
        await pilot.press("t")  # a new request cancels the first
        second = app.pane("throughput").jobs.job_id("throughput")
        assert second != first
        await wait_until(pilot, lambda: not any(j.job_id == first for j in app.session.measure.pending()),
                         what="the first search to stop")
        await wait_until(pilot, lambda: app.main.query_one("#throughput-table").row_count >= 1, what="a try")
        await pilot.press("c")
        # Stopped at its next try, or (a try longer than the 2 s grace on a loaded box) killed with its process,
        # which the pane's status line says: either way, c ended it.
        try:
            await wait_until(pilot, lambda: "cancelled" in screen_text(app, "#throughput-summary")
                             or "of the cancel" in app.pane("throughput").status, timeout=60,
                             what="the search cancelled")
        except AssertionError:  # seen once under two burners: what the pane said instead
            raise AssertionError(f"the search not said cancelled: {screen_text(app, '#throughput-summary')!r}, "
                                 f"{app.pane('throughput').status!r}") from None
        # Both searches have stopped in the measurement process: nothing keeps computing there.
        assert not app.session.measure.pending({"throughput"})


async def test_profile_shows_a_convolution_row_sorts_and_writes_the_trace(tiny_app):
    async with tiny_app(shape="3x16x16", size=(120, 32), profile_iters=2) as pilot:
        app = pilot.app
        await pilot.press("p")
        assert app.main.active_tab() == "profile"
        pane = app.main.query_one("#profile")
        await wait_until(pilot, lambda: pane.result is not None, what="the profile")
        names = [r[0] for r in rows(app, "#profile-table")]
        assert any("conv" in name for name in names)
        trace = pane.result.trace_path
        assert trace and os.path.exists(trace)
        assert trace in screen_text(app, "#profile-trace")
        assert any(trace in text for text in notifications(app))
        # o cycles the columns shown that can tell the ops apart: on the CPU not the device ones (all "–").
        assert pane.sort_key == "self_cpu"
        await pilot.press("o")
        assert pane.sort_key == "name"
        await pilot.press("o")
        assert pane.sort_key == "calls"
        await pilot.press("o")
        assert pane.sort_key == "self_cpu"
        await pilot.press("o", "o")
        assert pane.sort_key == "calls"
        calls = [int(r[1]) for r in rows(app, "#profile-table")]
        assert calls == sorted(calls, reverse=True)
        # Pressing the "operator" header sorts by name.
        await pilot.click("#profile-table", offset=(2, 0))
        assert pane.sort_key == "name"
        names = [r[0] for r in rows(app, "#profile-table")]
        assert names == sorted(names)


async def test_a_failed_profile_is_notified_and_the_earlier_result_stays(tiny_app):
    async with tiny_app(shape="3x16x16", size=(120, 32), profile_iters=1) as pilot:
        app = pilot.app
        await pilot.press("p")
        pane = app.main.query_one("#profile")
        await wait_until(pilot, lambda: pane.result is not None, what="the profile")
        before = app.main.query_one("#profile-table").row_count
        await choose_model(pilot, "tests.tinymodels:oom_model", "3x16x16")
        await pilot.press("p")
        await wait_until(pilot, lambda: "error" in screen_text(app, "#profile-status"), what="the error line")
        assert any("out of memory" in text.lower() for text in notifications(app))
        assert app.main.query_one("#profile-table").row_count == before > 0


async def test_history_lists_runs_made_here_and_compares_two_marked():
    app = make_app(warmup=1, iters=10)
    async with app.run_test(size=(120, 32)) as pilot:
        await wait_ready(pilot)
        await pilot.press("8")
        await wait_until(pilot, lambda: "no runs recorded yet" in screen_text(app, "#history-note"),
                         what="the empty history")
        await pilot.press("1")
        await choose_model(pilot, shape="3x16x16")
        await pilot.press("r")
        await wait_until(pilot, lambda: app.session.runs.get(1) is not None and app.session.runs.get(1).finished, what="run 1")
        await flip(pilot, "mkldnn_enabled")  # run 2, with oneDNN off
        await wait_until(pilot, lambda: app.session.runs.get(2) is not None and app.session.runs.get(2).finished, what="run 2")
        await pilot.press("8")
        table = app.main.query_one("#history-table")
        await wait_until(pilot, lambda: table.row_count == 2, what="both runs listed")
        listed = [row_cells(table, i) for i in range(table.row_count)]
        assert all(TINY in r["model"] for r in listed)
        assert "oneDNN" in listed[0]["flags"] or "mkldnn" in listed[0]["flags"]  # run 2 (oneDNN off) is the newest
        newest = app.main.query_one("#history").records
        assert list(newest)[0].startswith(listed[0]["id"])  # newest first
        table.focus()
        await pilot.press("m", "down", "enter")
        text = screen_text(app, "#history-compare")
        assert "as fast" in text or "as slow" in text
        assert "flag mkldnn_enabled: on -> off" in text
        # A third run appears without leaving the tab; the marks stay.
        await pilot.press("r")
        await wait_until(pilot, lambda: table.row_count == 3, what="the third run listed")
        assert len(app.main.query_one("#history").marked) == 2


async def test_corrupt_history_lines_are_a_warning_not_a_failure(tmp_path):
    path = tmp_path / "runs.jsonl"
    path.write_text("{not json\n")
    app = make_app(history_path=str(path))
    async with app.run_test(size=(120, 32)) as pilot:
        await wait_ready(pilot)
        await pilot.press("8")
        await wait_until(pilot, lambda: any("skipped" in text for text in notifications(app)),
                         what="the warning")
        assert "1 bad line(s) skipped" in screen_text(app, "#history-note")


async def test_a_finished_run_shows_its_roofline(tiny_app):
    async with tiny_app(shape="3x16x16", size=(120, 32), warmup=1, iters=10) as pilot:
        app = pilot.app
        await pilot.press("r")
        await wait_until(pilot, lambda: "roofline" in screen_text(app, "#run-roofline"), what="the roofline line")
        line = screen_text(app, "#run-roofline")
        assert "#1" in line and "FLOP/s achieved" in line and "FLOP/byte" in line
        assert "MFU n/a (CPU peak" in line  # no CPU peak is known: it says why
        # per layer in the Layers tab: the arithmetic intensity where the data allows (side needs a peak)
        conv = next(i for i, row in enumerate(rows(app, "#layers-table")) if row[0] == "conv")
        # the Layers tab hears of the roofline after the Timing pane's line shows it: wait for the table as a user would
        await wait_until(pilot, lambda: rows(app, "#layers-table")[conv][7] != "–", what="the conv layer's intensity")
        intensity = rows(app, "#layers-table")[conv][7]
        assert float(intensity) > 0
        assert rows(app, "#layers-table")[conv][8] == "–"  # no CPU peak: no side


async def test_l_times_each_layer_of_the_last_run_sorted_by_time_with_what_no_layer_owns(tiny_app):
    async with tiny_app(shape="3x16x16", size=(80, 24), warmup=1, iters=10) as pilot:
        app = pilot.app
        pane = app.pane("layers")
        await pilot.press("l")  # no run yet: it says what to do first
        await wait_until(pilot, lambda: any("time a run at a fixed input shape first" in t for t in notifications(app)), what="the hint")
        await pilot.press("r")
        await wait_until(pilot, lambda: pane._run is not None, what="the run's roofline")
        assert "l: the time of each layer of run #1" in screen_text(app, "#layers-times")
        await pilot.press("l")
        assert app.main.active_tab() == "layers"
        await wait_until(pilot, lambda: pane._timed is not None, what="the layer times")
        table = app.main.query_one("#layers-table")
        assert [str(c.label) for c in table.columns.values()][:4] == ["layer", "time", "% pass", "FLOP/s"]
        shown = rows(app, "#layers-table")
        times = {layer.name: layer.time_ms for layer in pane._timed.layers}
        assert [row[0] for row in shown] == sorted(times, key=lambda name: -times[name])  # longest first
        conv = next(row for row in shown if row[0] == "conv")
        assert conv[1].endswith(("ms", "µs")) and float(conv[2]) > 0 and conv[3][-1] in "kMGT"
        line = screen_text(app, "#layers-times")
        assert "run #1 · CPU wall time per layer, longest first" in line and "timed per layer (mean of" in line
        tip = str(app.main.query_one("#layers-times").tooltip)
        assert "CPU wall time of each module's forward" in tip and "rest of the iteration" in tip
        # A new run: its times are not the old run's.
        await pilot.press("r")
        await wait_until(pilot, lambda: pane._run is not None and pane._run[0] == "#2", what="run 2's roofline")
        assert pane._timed is None and "time" not in [str(c.label) for c in table.columns.values()]
