"""Smaller items of issue 21 in the app, driven with Pilot on the CPU: each says what a user would otherwise
meet without a word (identical A/B arms, cancelled empty runs pushing out the baseline, a header and body
that disagree, names cut from the left, toasts that stay over a table)."""

from __future__ import annotations

from tests.app.helpers import flip, screen_text, shown_notifications, wait_until
from tests.app.recorded_answers import NOT_PLACED, TimedRuns, run_in_flight
from tests.fakes.fake_measurement import Failed


async def test_a_with_identical_arms_says_there_is_nothing_to_compare(tiny_app):
    async with tiny_app(shape="3x16x16", size=(110, 34), warmup=1, iters=6) as pilot:
        app = pilot.app
        await pilot.press("a")  # no flag flipped: A (the defaults) and B (the flags now) are the same
        await wait_until(pilot, lambda: "arms A and B are the same flags" in screen_text(app, "#compare-verdict"),
                         what="the Compare pane to say the arms are the same")
        from textual.markup import escape

        from torchperf_tui.engine.measurements.ab_arms import same_arms_refusal  # the CLI's sentence too
        from torchperf_tui.engine.measurements.flags import Flags

        remedy = "flip a flag first: A/B compares the flags before the flip with the current ones"
        text = same_arms_refusal(remedy, app.session.flags_text(Flags()))  # the threads as the process left them
        assert app.pane("compare").verdict == f"A/B: {escape(text)}"
        assert app.pane("compare").ab_runs is None and len(app.session.runs) == 0  # nothing was started


def _run(run_id: int, status: str = "done", samples: int = 3):
    from torchperf_tui.app.runs import LiveRun

    return LiveRun(run_id=run_id, model="m", device="cpu", flags=None, flags_text="defaults", status=status,
                     samples_ms=[1.0] * samples)


def test_cancelled_empty_runs_take_no_slot_and_never_push_out_the_baseline():
    from torchperf_tui.app.runs import MAX_RUNS, SessionRuns

    history = SessionRuns()
    history.add(_run(1))
    history.baseline_id = 1
    for run_id in range(2, 2 + 3 * MAX_RUNS):  # r pressed and cancelled at once, again and again
        history.add(_run(run_id, "cancelled", samples=0))
    assert [r.run_id for r in history][0] == 1 and history.baseline().run_id == 1
    assert len([r for r in history if not r.samples_ms]) == 1  # only the newest, until the next run comes
    history.add(_run(100))
    assert [r.run_id for r in history] == [1, 100]


def test_a_full_history_drops_the_oldest_run_that_is_not_the_baseline():
    from torchperf_tui.app.runs import MAX_RUNS, SessionRuns

    history = SessionRuns()
    for run_id in range(1, MAX_RUNS + 1):
        history.add(_run(run_id))
    history.baseline_id = 3
    for run_id in range(MAX_RUNS + 1, MAX_RUNS + 5):
        history.add(_run(run_id))
    kept = [r.run_id for r in history]
    assert len(kept) == MAX_RUNS and 3 in kept and history.baseline().run_id == 3
    assert kept == [3, *range(6, MAX_RUNS + 5)]  # 1, 2, 4, 5 went: the oldest that were not the baseline
    # with no baseline chosen, the implicit one (the oldest complete run) stays too
    implicit = SessionRuns()
    for run_id in range(1, 2 * MAX_RUNS):
        implicit.add(_run(run_id))
    assert implicit.baseline().run_id == 1 and len(implicit) == MAX_RUNS


async def test_the_timing_header_and_body_agree_at_the_first_timed_batch(tiny_app):
    """r; the run's first timed batch comes at once after its warm-up, inside the live statistics' refresh period
    (the fake measurement process streams both and holds the run there): the body has its statistics when the
    header says 'timed 15/64', never 'no timed samples yet'."""
    in_flight = run_in_flight(warmup=[2.0] * 10, timed=[1.0 + i / 100 for i in range(15)], total=64)
    async with tiny_app(shape="3x16x16", size=(110, 34), answers={"time": in_flight}) as pilot:
        app = pilot.app
        await pilot.press("r")
        await wait_until(pilot, lambda: "timed 15/64" in screen_text(app, "#run-status"), what="the first timed batch")
        body = screen_text(app, "#run-stats")
        assert "no timed samples yet" not in body and "n=15" in body, body


def test_a_layer_path_too_long_for_its_column_keeps_its_start_its_block_and_its_leaf():
    from torchperf_tui.core.formatting import fit_name

    assert fit_name("layer1.0.conv1", 14) == "layer1.0.conv1"
    assert fit_name("layer1.0.conv1", 13) == "lay…1.0.conv1"  # once '…yer1.0.conv1': cut from the left
    assert fit_name("layer4.2.downsample.0", 16) == "lay…4.2.downs….0"
    for name, width in (("layer4.2.downsample.0", 16), ("features.3.block.0.conv", 14), ("layer1.0.conv1", 8)):
        fitted = fit_name(name, width)
        assert len(fitted) <= width and fitted.endswith(name.split(".")[-1]), fitted
        assert "……" not in fitted
    # a path whose words cannot shrink enough is cut from the left, keeping the leaf's parent readable
    assert fit_name("features.0.block.0.squeeze_excitation.fc1", 18) == "…ze_excitation.fc1"


def test_a_module_factory_too_long_for_the_history_keeps_the_factory_whole():
    from torchperf_tui.app.widgets.history.history_pane import fit_model

    assert fit_model("mypkg.models:make_net", 21) == "mypkg.models:make_net"
    assert fit_model("mypkg.models:make_net", 18) == "myp….mod…:make_net"
    assert fit_model("mypkg.models:make_net", 12) == "…:make_net"
    for width in (20, 18, 15, 12):
        fitted = fit_model("mypkg.models:make_net", width)
        assert len(fitted) <= width and fitted.endswith(":make_net"), fitted
    assert fit_model("efficientnet_b7", 10) == "efficient…"  # a torchvision name keeps its start


def test_a_model_with_overrides_too_long_for_the_history_keeps_its_name_and_cuts_its_overrides():
    # Walking the app at 80x24, two rows of hf:llama with overrides read '…eads=4)': the model's name was gone.
    from torchperf_tui.app.widgets.history.history_pane import fit_model

    label = "hf:llama (num_hidden_layers=2,hidden_size=256,num_key_value_heads=4)"
    assert fit_model(label, 70) == label
    assert fit_model(label, 20) == "hf:llama (num_hidd…)"
    assert fit_model(label, 10) == "hf:llama…"
    for width in range(4, 30):
        fitted = fit_model(label, width)
        assert len(fitted) <= width, (width, fitted)
        if width >= 9:
            assert fitted.startswith("hf:llama"), (width, fitted)


async def test_a_failed_comparison_is_said_in_the_pane_and_its_toast_is_short(tiny_app):
    """A flip (its run answered), then a; the comparison fails in the measurement process: the Compare pane's
    verdict line says the error, and its toast is short (once 8 s over the table at 80x24)."""
    answers = {"time": TimedRuns(), "roofline": NOT_PLACED, "ab": Failed("the model raised ValueError: boom")}
    async with tiny_app(shape="3x16x16", size=(80, 24), answers=answers) as pilot:
        app = pilot.app
        await flip(pilot, "mkldnn_enabled")
        await pilot.press("a")
        said = "error: the model raised ValueError: boom"
        await wait_until(pilot, lambda: said in screen_text(app, "#compare-verdict"), what="the Compare pane to say it")
        failed = [shown for shown in shown_notifications(app) if shown.title == "compare failed"]
        assert failed and all(shown.timeout is not None and shown.timeout <= 5 for shown in failed)
