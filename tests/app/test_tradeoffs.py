"""The cuDNN trade-offs in the TUI (issue 6), driven with Pilot on the CPU with the tiny model: the shape
schedule selector, A/B on a flag flip with its verdict, the kernels table, the determinism check, the
memory snapshot key and the memory chart's per-iteration trace and release marks."""

from __future__ import annotations

from types import SimpleNamespace

from tests.app.helpers import TINY, flip, make_app, notifications, row_cells, screen_text, wait_ready, wait_until
from tests.app.test_analysis_tabs import rows
from torchperf_tui.app.runs import LiveRun
from torchperf_tui.app.widgets.memory.memory_chart import MemoryChart
from torchperf_tui.app.widgets.timing.histogram import LatencyHistogram, LatencyOverlay
from torchperf_tui.app.widgets.timing.run_lines import compile_text
from torchperf_tui.engine.records.history_file import HistoryFile


async def pick(pilot, name: str, downs: int) -> None:
    """Open a run-option select with the keyboard and move `downs` rows from the current value."""
    pilot.app.main.query_one(f"#option-{name}").focus()
    await pilot.press("enter", *["down"] * downs, "enter")
    await pilot.press("escape")


async def test_a_random_shape_schedule_reruns_and_draws_new_shape_iterations_apart(tiny_app):
    async with tiny_app(shape="3x32x32", size=(110, 34), warmup=1, iters=12) as pilot:
        app = pilot.app
        await pick(pilot, "shapes", 2)  # fixed -> cycle:4 -> random
        assert app.pane("options").options["shapes"] == "random"
        timing = app.pane("timing")
        await wait_until(pilot, lambda: timing.record is not None and timing.record.status == "done", what="the run")
        record = timing.record
        assert record.shapes == "random" and record.result.shapes == "random"
        assert len(record.first_seen) == len(record.samples_ms) == 12 and any(record.first_seen)
        assert record.first_seen == record.result.sample_first_seen
        stats = screen_text(app, "#run-stats")
        assert "shapes random:" in stats and "new-shape iteration" in stats and "tuning cost" in stats
        await wait_until(pilot, lambda: "roofline" in screen_text(app, "#run-roofline"), what="the roofline line")
        roofline = screen_text(app, "#run-roofline")
        assert "needs one input shape" in roofline and "Error" not in roofline  # FLOPs are per shape
        histogram = app.main.query_one(LatencyHistogram)
        assert len(histogram.first_seen) == sum(record.first_seen)
        assert len(histogram.samples) + len(histogram.first_seen) == 12


async def test_a_flip_in_ab_mode_runs_both_flag_sets_interleaved_and_gives_a_verdict(tiny_app):
    async with tiny_app(shape="3x16x16", size=(110, 34), warmup=1, iters=10) as pilot:
        app = pilot.app
        await pilot.press("a")  # nothing flipped yet: says how to use it
        await wait_until(pilot, lambda: any("flip a flag first" in text for text in notifications(app)), what="the hint")
        await pick(pilot, "flip", 1)
        assert app.pane("options").options["flip"] == "ab"
        await flip(pilot, "mkldnn_enabled")
        assert app.main.active_tab() == "compare"
        a_id, b_id = app.pane("compare").ab_runs
        await wait_until(pilot, lambda: app.session.runs.get(b_id).status == "done", what="the comparison")
        arm_a, arm_b = app.session.runs.get(a_id), app.session.runs.get(b_id)
        assert (arm_a.arm, arm_b.arm) == ("A", "B") and arm_a.label.endswith(" A")
        assert arm_a.flags.mkldnn_enabled is True and arm_b.flags.mkldnn_enabled is False
        assert len(arm_a.samples_ms) == len(arm_b.samples_ms) == 10 * 3
        assert arm_b.verdict is not None and arm_b.verdict.blocks == 10
        verdict = screen_text(app, "#compare-verdict")
        assert "A/B, 10 interleaved block pairs" in verdict and "CI" in verdict
        assert ("B is" in verdict) or ("no significant difference" in verdict)
        # The table is redrawn from a message posted as the comparison ends: wait for it, then read it.
        await wait_until(pilot, lambda: any("A" in row[0] and row[2] == "baseline"
                                            for row in rows(app, "#compare-table")), what="the table redrawn")
        await wait_until(pilot, lambda: sum(r.kind == "ab" for r in HistoryFile().load().records) == 2,
                         what="both arms in the history file")
        labels = [label for label, _ in app.main.query_one(LatencyOverlay).series]
        assert any(label.startswith(arm_a.label) for label in labels)
        assert any(label.startswith(arm_b.label) for label in labels)


async def test_kernels_key_tables_each_conv_layer_under_the_old_and_new_flags(tiny_app):
    async with tiny_app(shape="3x32x32", size=(110, 34), warmup=1, iters=1_000_000) as pilot:
        app = pilot.app
        app.main.query_one("#batch").value = "2"  # oneDNN takes a float32 conv from batch 2
        await flip(pilot, "mkldnn_enabled")  # starts a run with the new flags
        timing = app.pane("timing")
        await wait_until(pilot, lambda: timing.record is not None and timing.record.samples_ms,
                         what="the run in flight")
        run = timing.record
        # One measurement on the machine at a time: k replaces the run in flight, which ends cancelled.
        await pilot.press("k")
        assert app.main.active_tab() == "kernels"
        await wait_until(pilot, lambda: run.status == "cancelled", what="the run to be cancelled")
        pane = app.main.query_one("KernelsPane")
        await wait_until(pilot, lambda: pane.result is not None, what="the kernel profile")
        table = app.main.query_one("#kernels-table")
        cells = row_cells(table, 0)
        assert table.row_count == 1
        if "ran" in cells:  # A and B stacked (the tab too narrow for them side by side): two lines a row
            (name, choice), (a_ran, b_ran) = cells["layer"].split("\n"), cells["ran"].split("\n")
        else:
            name, choice, a_ran, b_ran = cells["layer"], cells["changed"], cells["a"], cells["b"]
        assert name == "conv" and "changed" in choice
        assert "mkldnn_convolution" in a_ran and "slow_conv2d" in b_ran
        assert "1 of 1 conv layers changed" in screen_text(app, "#kernels-summary")
        assert "GPU view" in screen_text(app, "#kernels-note")


async def test_determinism_key_reports_bitwise_equality_and_memsnap_says_it_needs_cuda(tiny_app):
    async with tiny_app(shape="3x16x16", size=(110, 34)) as pilot:
        app = pilot.app
        await pilot.press("d")
        await wait_until(pilot, lambda: app.pane("timing").last_determinism is not None, what="the determinism check")
        assert "bitwise identical" in screen_text(app, "#run-note")
        await pilot.press("n")
        await wait_until(pilot, lambda: any("needs a CUDA device" in text for text in notifications(app)),
                         what="the memsnap error")


async def test_memory_chart_draws_the_runs_per_iteration_trace_and_marks_a_release(tiny_app):
    async with tiny_app(shape="3x16x16", size=(110, 34), warmup=1, iters=8) as pilot:
        app = pilot.app
        await pilot.press("r")
        await wait_until(pilot, lambda: app.session.runs.get(1) is not None and app.session.runs.get(1).status == "done",
                         what="the run")
        assert app.session.run_memory_kind == "rss" and len(app.session.run_memory) == 1 + 1 + 8 + 1
        await pilot.press("e")
        await wait_until(pilot, lambda: app.pane("memory").last_release is not None, what="the release")
        await pilot.press("5")
        chart = app.main.query_one(MemoryChart)
        await wait_until(pilot, lambda: len(chart.series) == 2 and chart.marks, what="the chart with the run")
        assert [label for label, _ in chart.series] == ["process RSS", "RSS, per iteration"]
        assert chart.marks[0][1].startswith("freed ") and chart.marks[0][0] <= 0


def test_a_tuning_cost_that_comes_out_negative_is_said_in_words_and_in_ms():
    from torchperf_tui.app.widgets.timing.run_lines import shapes_text

    record = LiveRun(run_id=1, model="m", device="cpu", flags=None, flags_text="", shapes="random")
    record.samples_ms, record.first_seen = [30.0, 31.0, 29.0], [True, False, True]
    record.result = SimpleNamespace(shape_report=SimpleNamespace(tuning_cost_ms=-74.87, unrepeated=34))
    text = shapes_text(record)
    assert "no tuning cost measured" in text and "74.87 ms faster" in text and "µs" not in text
    record.result.shape_report.tuning_cost_ms = 12.5
    assert "tuning cost 12.50 ms (34 shape(s) never repeated)" in shapes_text(record)


def test_compile_line_reports_compile_time_apart_or_the_failure_with_eager_numbers():
    record = LiveRun(run_id=1, model="m", device="cpu", flags=None, flags_text="", compile="default")
    assert "compiling" in compile_text(record)
    record.result = SimpleNamespace(compiled=True, compile_s=12.34, compile_error=None)
    assert compile_text(record) == "torch.compile mode default: compiled in 12.3 s (not in the samples)"
    record.result = SimpleNamespace(compiled=False, compile_s=None, compile_error="no C++ compiler")
    assert "failed, eager numbers shown" in compile_text(record) and "no C++ compiler" in compile_text(record)
    # an error that quotes a path or an index is text, not markup (a closing tag failed the whole line)
    from textual.content import Content

    record.result = SimpleNamespace(compiled=False, compile_s=None, compile_error="call to [/usr/bin/cc] failed: a[i]")
    assert Content.from_markup(compile_text(record)).plain == \
        "torch.compile failed, eager numbers shown: call to [/usr/bin/cc] failed: a[i]"
    record.compile = None
    assert compile_text(record) == ""


async def test_the_graph_option_reaches_the_engine_config():
    app = make_app()
    async with app.run_test(size=(110, 34)) as pilot:
        await wait_ready(pilot)
        picker = app.pane("picker")
        picker.model = TINY  # chosen without its analysis: only the config is looked at
        app.main.query_one("#shape").value = "3x16x16"
        assert app.main.selection().config().compile is None
        await pick(pilot, "compile", 2)  # eager -> compile -> compile+graphs
        assert app.pane("options").options["compile"] == "reduce-overhead"
        cfg = app.main.selection().config()
        assert cfg.compile == "reduce-overhead" and cfg.shapes == "fixed"
