"""State that belongs to a model goes with it: the args, seq and shape typed for one model are not another's (and come
back with it), a refusal names the app's field rather than the CLI's option, choosing a model puts the focus where
`r` runs it, a result's lines replace a failed run's instead of stacking under them, and Compare's plot during an
A/B shows the A/B's arms, not a kept run beside them.

The catalogue, the analyses and the measurements are recorded answers (tests/app/recorded_answers.py and the
picker's tests), except where the measurement process's own refusal is what is checked."""

from __future__ import annotations

from tests.app.helpers import (TINY, analysed, choose_model, flip, notifications, paste, row_cells, screen_text,
                               wait_ready, wait_until)
from tests.app.recorded_answers import TimedRuns
from tests.app.test_picker_sources import GPT2_ARGS, analyses, sources_app
from tests.fakes.fake_measurement import HELD, Failed, Recorded

SIZE = (120, 40)


async def pick(pilot, text: str) -> None:
    """/ then `text` in the filter (what was typed there before cleared, as a user clears it) and ⏎; returns once
    its analysis is shown."""
    await pilot.press("escape", "slash")
    pilot.app.main.query_one("#model-filter").value = ""
    await paste(pilot, text, "enter")
    await wait_until(pilot, lambda: analysed(pilot.app, text), what=f"the analysis of {text}")


async def type_into(pilot, field_id: str, text: str) -> None:
    """Click a field, clear it and paste `text` with ⏎, as a user does."""
    await pilot.click(f"#{field_id}")
    pilot.app.main.query_one(f"#{field_id}").value = ""
    await paste(pilot, text, "enter")


def fields(app) -> tuple[str, str, str]:
    """(args, seq, input) as the sidebar shows them."""
    return tuple(app.main.query_one(f"#{name}").value for name in ("model-args", "seq-len", "shape"))


def timed(fake) -> list:
    """The configs of the timing runs asked for, in order."""
    return [params["cfg"] for kind, params in fake.requests if kind == "time"]


# -- args, seq and input belong to their model -------------------------------------------------------------------

async def test_args_and_seq_typed_for_one_model_are_not_the_next_models_and_come_back_with_it():
    app, fake = sources_app()
    async with app.run_test(size=SIZE) as pilot:
        await wait_ready(pilot)
        await pick(pilot, "hf:gpt2")
        await type_into(pilot, "model-args", GPT2_ARGS)
        await type_into(pilot, "seq-len", "32")
        await wait_until(pilot, lambda: analysed(app, "hf:gpt2") and app.pane("picker").complexity.input_shape == (1, 32),
                         what="gpt2 analysed at its overrides and length 32")
        await pick(pilot, "resnet18")
        assert fields(app)[:2] == ("", "")  # gpt2's n_layer=2 would make every resnet18 run fail
        assert analyses(fake)[-1]["model_args"] == () and analyses(fake)[-1]["seq_len"] is None
        await pilot.press("r")  # the focus is in the list: r runs
        await wait_until(pilot, lambda: app.session.runs.get(1) is not None and app.session.runs.get(1).finished,
                         what="resnet18's run")
        assert app.session.runs.get(1).status == "done" and timed(fake)[-1].model_args == ()
        await type_into(pilot, "shape", "3x64x64")  # an input typed for resnet18 is resnet18's too
        await wait_until(pilot, lambda: analysed(app, "resnet18") and app.pane("picker").complexity.input_shape[-1] == 64,
                         what="resnet18 at 3x64x64")
        await pick(pilot, "hf:gpt2")
        assert fields(app)[:2] == (GPT2_ARGS, "32")  # back as they were left
        assert analyses(fake)[-1]["model_args"] == (("n_layer", "2"), ("n_embd", "64"), ("n_head", "2"))
        assert analyses(fake)[-1]["seq_len"] == 32
        await pick(pilot, "resnet18")
        assert fields(app) == ("", "", "3x64x64")
        assert analyses(fake)[-1]["input_shape"] == (1, 3, 64, 64)


async def test_a_shape_typed_before_the_first_model_is_that_models_as_args_and_seq_are():
    app, fake = sources_app()
    async with app.run_test(size=SIZE) as pilot:
        await wait_ready(pilot)
        await type_into(pilot, "shape", "3x64x64")
        await pick(pilot, "resnet18")
        assert [a["input_shape"] for a in analyses(fake)] == [(1, 3, 64, 64)]  # analysed once, at the shape typed
        assert fields(app)[2] == "3x64x64"
        await pick(pilot, "hf:gpt2")
        assert analyses(fake)[-1]["input_shape"] is None and fields(app)[2] != "3x64x64"  # resnet18's, not gpt2's
        await pick(pilot, "resnet18")
        assert fields(app)[2] == "3x64x64" and analyses(fake)[-1]["input_shape"] == (1, 3, 64, 64)


async def test_model_args_given_on_the_command_line_stay_with_the_model_given_there():
    app, fake = sources_app(model="hf:gpt2", model_args=GPT2_ARGS, seq_len="32")
    async with app.run_test(size=SIZE) as pilot:
        await wait_ready(pilot)
        await wait_until(pilot, lambda: analysed(app, "hf:gpt2"), what="the model given on the command line")
        assert fields(app)[:2] == (GPT2_ARGS, "32")
        await pick(pilot, "resnet18")
        assert fields(app)[:2] == ("", "")
        await pick(pilot, "hf:gpt2")
        assert fields(app)[:2] == (GPT2_ARGS, "32")
        assert analyses(fake)[-1]["model_args"] == (("n_layer", "2"), ("n_embd", "64"), ("n_head", "2"))


async def test_a_refusal_names_the_apps_field_not_the_clis_option(tiny_app):
    """The measurement process's own refusal of overrides for a custom model, in the app's words."""
    async with tiny_app(size=SIZE, warmup=0, iters=5) as pilot:
        app = pilot.app
        await type_into(pilot, "model-args", "width=2")
        await wait_until(pilot, lambda: "error" in screen_text(app, "#model-summary"), what="the analysis refused")
        summary = " ".join(screen_text(app, "#model-summary").split())
        assert summary.endswith("model arguments are for torchvision, timm: and hf: models; clear the args field "
                                "(sidebar, under the model list)")
        await pilot.press("escape", "r")
        await wait_until(pilot, lambda: app.session.runs.get(1) is not None and app.session.runs.get(1).finished,
                         what="the run refused")
        stats = " ".join(screen_text(app, "#run-stats").split())
        assert "clear the args field (sidebar, under the model list)" in stats
        assert not any("--model-args" in text for text in notifications(app) + [summary, stats])


# -- choosing a model puts the focus where r runs it ------------------------------------------------------------

async def test_a_spec_typed_in_the_filter_and_entered_leaves_the_filter_so_r_runs_it():
    app, fake = sources_app()
    async with app.run_test(size=SIZE) as pilot:
        await wait_ready(pilot)
        await pilot.press("slash", *TINY, "enter")  # not in the catalogue: the engine resolves it
        await wait_until(pilot, lambda: analysed(app, TINY), what="the analysis of the typed spec")
        assert app.main.focused is app.main.query_one("#model-list")
        await pilot.press("r")
        await wait_until(pilot, lambda: app.session.runs.get(1) is not None and app.session.runs.get(1).finished,
                         what="the run r started")
        assert app.main.query_one("#model-filter").value == TINY  # no "r" typed into it
        assert timed(fake)[-1].model == TINY
        await pilot.click("#custom-model")
        await paste(pilot, "tests.tinymodels:threads_probe", "enter")  # the custom field's ⏎ too
        await wait_until(pilot, lambda: analysed(app, "tests.tinymodels:threads_probe"), what="the custom model")
        assert app.main.focused is app.main.query_one("#model-list")


# -- a result's lines replace a failed run's ---------------------------------------------------------------------

class FailsFirst:
    """Answers the first "time" job with a failure, the next ones with recorded runs."""

    def __init__(self) -> None:
        self.runs, self.asked = TimedRuns(), 0

    def __call__(self, params: dict):
        self.asked += 1
        return Failed("the model's forward raised RuntimeError: boom") if self.asked == 1 else self.runs(params)


async def test_a_failed_runs_lines_go_when_a_later_run_or_a_generation_starts():
    app, _ = sources_app(answers={"time": FailsFirst(), "generate": Recorded(HELD)})
    async with app.run_test(size=SIZE) as pilot:
        await wait_ready(pilot)
        await choose_model(pilot, TINY, "3x32x32")
        await pilot.press("r")
        await wait_until(pilot, lambda: "boom" in screen_text(app, "#run-stats"), what="run #1's failure")
        assert screen_text(app, "#run-status").startswith("run #1 · failed")
        await pilot.press("g")  # a generation under a failed run: the failure would read as the generation's
        await wait_until(pilot, lambda: "building" in screen_text(app, "#generation-lines"), what="the generation")
        await wait_until(pilot, lambda: screen_text(app, "#run-status") == "", what="run #1's lines gone")
        assert "boom" not in screen_text(app, "#run-stats")
        await pilot.press("r")  # a run after it: the generation's line (cancelled by the run) goes, the run shows
        await wait_until(pilot, lambda: app.session.runs.get(2) is not None and app.session.runs.get(2).status == "done",
                         what="run #2")
        assert screen_text(app, "#run-status").startswith("run #2 · done")
        assert "error" not in screen_text(app, "#run-stats")
        assert not app.main.query_one("#generation").display


async def test_a_failed_generations_lines_go_when_a_run_starts_and_a_failed_run_is_replaced_by_the_next():
    app, _ = sources_app(answers={"time": FailsFirst(), "generate": Failed("generation needs a causal language model")})
    async with app.run_test(size=SIZE) as pilot:
        await wait_ready(pilot)
        await choose_model(pilot, TINY, "3x32x32")
        await pilot.press("g")
        await wait_until(pilot, lambda: "error" in screen_text(app, "#generation-lines"), what="the refusal")
        await pilot.press("r")
        await wait_until(pilot, lambda: app.session.runs.get(1) is not None and app.session.runs.get(1).finished,
                         what="run #1")
        assert not app.main.query_one("#generation").display  # its failure is not this run's
        assert "boom" in screen_text(app, "#run-stats")
        await pilot.press("r")
        await wait_until(pilot, lambda: app.session.runs.get(2) is not None and app.session.runs.get(2).status == "done",
                         what="run #2")
        assert "boom" not in screen_text(app, "#run-stats") and "error" not in screen_text(app, "#run-stats")


async def test_another_model_clears_the_last_models_run_from_the_timing_pane_but_not_from_compare():
    app, _ = sources_app()
    async with app.run_test(size=SIZE) as pilot:
        await wait_ready(pilot)
        await pick(pilot, "resnet18")
        await pilot.press("r")
        await wait_until(pilot, lambda: app.session.runs.get(1) is not None and app.session.runs.get(1).status == "done",
                         what="resnet18's run")
        assert screen_text(app, "#run-status").startswith("run #1 · done · resnet18")
        await pick(pilot, "alexnet")
        assert screen_text(app, "#run-status") == "" and screen_text(app, "#run-stats") == ""
        histogram = app.main.query_one("#latency-histogram")
        assert not histogram.samples and histogram.empty_text == "no samples yet: press r to run"
        await pilot.press("2")
        await wait_until(pilot, lambda: app.main.query_one("#compare-table").row_count == 1, what="Compare's table")
        assert row_cells(app.main.query_one("#compare-table"), 0)["run"].endswith("#1")


# -- Compare's plot during an A/B ---------------------------------------------------------------------------------

def ab_in_flight(params: dict) -> Recorded:
    """An A/B caught in flight: its first block of each arm, then nothing until it is cancelled."""
    return Recorded(HELD, progress=(("block", ("A", 0, 20, [6.0 + 0.1 * i for i in range(10)])),
                                    ("block", ("B", 1, 20, [5.0 + 0.1 * i for i in range(10)]))))


async def test_compares_plot_during_an_ab_shows_its_arms_not_a_kept_run_beside_them():
    app, _ = sources_app(answers={"ab": ab_in_flight})
    async with app.run_test(size=SIZE) as pilot:
        await wait_ready(pilot)
        await choose_model(pilot, TINY, "3x32x32")
        await pilot.press("r")
        await wait_until(pilot, lambda: app.session.runs.get(1) is not None and app.session.runs.get(1).status == "done",
                         what="run #1")
        await flip(pilot, "mkldnn_enabled")  # a new run with the flag flipped: #2
        await wait_until(pilot, lambda: app.session.runs.get(2) is not None and app.session.runs.get(2).status == "done",
                         what="run #2")
        await pilot.press("a")  # the flags before the flip against the ones now: arms #3 A and #4 B
        overlay = app.main.query_one("#latency-overlay")
        await wait_until(pilot, lambda: "block 2 of 20" in screen_text(app, "#compare-verdict"), what="the A/B's blocks")
        await wait_until(pilot, lambda: len(overlay.series) == 2, what="the arms overlaid")
        assert [label.split()[:2] for label, _ in overlay.series] == [["#3", "A"], ["#4", "B"]]
        table = app.main.query_one("#compare-table")
        marked = [row_cells(table, i)["run"] for i in range(table.row_count) if "■" in row_cells(table, i)["run"]]
        assert [cell.split()[-2:] for cell in marked] == [["#3", "A"], ["#4", "B"]]  # the plot's colours, in the table


def test_the_fields_kept_per_model_are_bounded_and_a_model_left_at_its_defaults_takes_no_slot():
    from torchperf_tui.app.widgets.picker.model_fields import FieldsPerModel, ModelFields

    kept = FieldsPerModel(limit=2)
    kept.keep("resnet18", ModelFields())
    assert len(kept) == 0 and kept.recall("resnet18") == ModelFields()
    for spec in ("hf:gpt2", "hf:llama", "timm:vit_base_patch16_224"):
        kept.keep(spec, ModelFields(model_args="depth=2"))
    assert len(kept) == 2 and kept.recall("hf:gpt2") == ModelFields()  # the least recently left went first
    kept.keep("hf:llama", ModelFields())  # left at its defaults again: forgotten
    assert kept.recall("hf:llama") == ModelFields() and len(kept) == 1
