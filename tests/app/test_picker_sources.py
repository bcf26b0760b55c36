"""The picker over every model source: the filter matches letters in order over torchvision, timm and transformers
names, 'timm:' or 'hf:' typed first narrows the list to that source, ⏎ chooses the best match; the args and seq
fields reach the Selection and the jobs made from it, and a bad override is one line where the picker's errors go.

The catalogue and the analyses are recorded answers (the measurement process would list ~2,300 names and build each
model on the meta device); the entries carry their source as the catalogue's ModelEntry does."""

from __future__ import annotations

from dataclasses import dataclass

from torchperf_tui.app.widgets.picker.model_filter import (
    filter_catalogue,
    fuzzy_score,
    split_query,
)
from torchperf_tui.engine.workloads.model_entry import ModelEntry

from tests.app.helpers import (
    analysed,
    make_app,
    notifications,
    paste,
    real_process,
    screen_text,
    wait_ready,
    wait_until,
)
from tests.app.recorded_answers import NOT_PLACED, TimedRuns
from tests.fakes.fake_measurement import Failed, FakeMeasurement, Recorded

GPT2_ARGS = "n_layer=2,n_embd=64,n_head=2"


@dataclass(frozen=True)
class SourcedEntry(ModelEntry):
    """A catalogue entry with its source, as the catalogue of every source lists them."""

    source: str = "torchvision"


def catalogue() -> list:
    """A catalogue of the three sources in its order: torchvision by task, timm's names, transformers' types; timm
    with many more names than the list shows under one heading."""
    tv = [SourcedEntry("alexnet", "classification", (3, 224, 224)),
          SourcedEntry("resnet18", "classification", (3, 224, 224)),
          SourcedEntry("resnet50", "classification", (3, 224, 224)),
          SourcedEntry("vit_b_16", "classification", (3, 224, 224)),
          SourcedEntry("fasterrcnn_resnet50_fpn", "detection", (3, 800, 800)),
          SourcedEntry("quantized_resnet18", "quantization", (3, 224, 224), supported=False, reason="int8 only")]
    timm_names = ["resnet18", "resnet50", "vit_base_patch16_224", "vit_small_patch16_224", "convnextv2_atto",
                  "efficientnet_b0"] + [f"test_net_{i:03d}" for i in range(300)]
    timm = [SourcedEntry(f"timm:{name}", "classification", (3, 224, 224), source="timm") for name in sorted(timm_names)]
    hf = [SourcedEntry(f"hf:{name}", "text", (128,), source="hf")
          for name in ("bert", "gpt2", "gpt_neox", "gptj", "llama", "t5")]
    return tv + timm + hf


def recorded_analysis(params: dict):
    """An analysis as the measurement process answers it: the model at the input asked (a transformers model's
    token ids at its sequence length, 128 by default), or the engine's line for an override the model lacks."""
    from torchperf_tui.engine.workloads.complexity_result import Complexity

    spec, batch = params["model"], params["batch"]
    for key, _ in params.get("model_args", ()):
        if key == "bogus":
            return Failed(f"{spec} has no setting 'bogus' to override")
    if spec.startswith("hf:"):
        shape = (batch, params.get("seq_len") or 128)
    else:
        shape = params.get("input_shape") or (batch, 3, 224, 224)
    return Recorded(Complexity(model=spec, input_shape=shape, dtype=params["dtype"], params_total=1000,
                               params_trainable=1000, size_bytes=4000, size_mb=4000 / 2**20, flops=2_000_000,
                               macs=1_000_000), extra={"entry": None, "input_note": None})


def sources_app(answers: dict | None = None, **options):
    """The app on this box's CPU with the recorded catalogue, analyses and timing runs, and any other `answers`
    (`options`: the app's, such as the model it starts on); the fake keeps the requests."""

    fake = FakeMeasurement({"catalogue": catalogue(), "analyse": recorded_analysis, "time": TimedRuns(),
                            "roofline": NOT_PLACED, **(answers or {})}, real=real_process())
    return make_app(frozen=True, measurement=fake, **options), fake


def listed(app) -> list[str]:
    """The model list's lines as shown (headings included), plain text."""
    listing = app.main.query_one("#model-list")
    lines = []
    for index in range(listing.option_count):
        prompt = listing.get_option_at_index(index).prompt
        lines.append(getattr(prompt, "plain", None) or _plain(str(prompt)))
    return lines


def _plain(markup: str) -> str:
    from rich.text import Text

    return Text.from_markup(markup).plain


def highlighted_id(app) -> str | None:
    listing = app.main.query_one("#model-list")
    return None if listing.highlighted is None else listing.get_option_at_index(listing.highlighted).id


def analyses(fake) -> list[dict]:
    return [params for kind, params in fake.requests if kind == "analyse"]


# -- the filter's scoring, alone ---------------------------------------------------------------------------------

def test_a_query_narrows_to_the_source_typed_before_it():
    assert split_query("timm:Vit B") == ("timm", ["vit", "b"])
    assert split_query(" hf:gpt2") == ("hf", ["gpt2"])
    assert split_query("resnet") == (None, ["resnet"])


def test_letters_in_order_match_and_the_closer_match_ranks_first():
    assert fuzzy_score("vtb16", "vit_base_patch16_224") is not None
    assert fuzzy_score("bv", "vit_base_patch16_224") is None  # out of order
    assert fuzzy_score("gpt2", "gpt2") > fuzzy_score("gpt2", "gpt2_large") > fuzzy_score("gpt2", "decision_gpt2") \
        > fuzzy_score("gpt2", "g_p_t_2")
    assert fuzzy_score("resnet", "resnet18") > fuzzy_score("resnet", "fasterrcnn_resnet50_fpn")
    assert fuzzy_score("vitb16", "vit_base_patch16_224") > fuzzy_score("vitb16", "samvit_base_patch16")  # word starts


def test_the_groups_follow_their_best_match_and_torchvision_keeps_its_tasks():
    groups = filter_catalogue(catalogue(), "resnet50")
    titles = [group.title for group in groups]
    assert titles[:2] == ["torchvision · classification", "timm"]  # a tie at the top: torchvision first
    assert "torchvision · detection" in titles
    assert groups[0].entries[0].name == "resnet50"
    assert filter_catalogue(catalogue(), "gpt2")[0].title == "transformers"


# -- the app, driven by keys ------------------------------------------------------------------------------------

async def test_typing_timm_then_letters_lists_timm_alone_and_enter_chooses_the_best_match():
    app, fake = sources_app()
    async with app.run_test(size=(110, 34)) as pilot:
        await wait_ready(pilot)
        await pilot.press("slash", *"timm:vit")
        await wait_until(pilot, lambda: listed(app)[0] == "timm", what="the timm models alone")
        lines = listed(app)
        assert {"timm:vit_base_patch16_224", "timm:vit_small_patch16_224"} <= set(lines)
        assert all(line.startswith("timm:") for line in lines[1:]), lines  # torchvision's vit_b_16 is not listed
        await pilot.press(*"b16")
        await wait_until(pilot, lambda: "timm:vit_small_patch16_224" not in listed(app), what="the filter narrowed")
        assert highlighted_id(app) == "timm:vit_base_patch16_224"
        await pilot.press("enter")
        await wait_until(pilot, lambda: analysed(app, "timm:vit_base_patch16_224"), what="the analysis of the timm model")
        assert analyses(fake)[-1]["model"] == "timm:vit_base_patch16_224"
        assert app.main.focused is app.main.query_one("#model-list")  # chosen: the next key is a command


async def test_slash_and_a_name_in_one_burst_all_go_to_the_filter_none_is_a_command():
    """Over SSH the keys typed quickly arrive together: '/' and the letters after it in one read. The filter takes
    the letters; none of them is the command it is elsewhere (r would run the highlighted model, e free memory, s
    save a screenshot)."""
    from textual import events

    app, fake = sources_app()
    async with app.run_test(size=(110, 34)) as pilot:
        await wait_ready(pilot)
        for key, character in (("slash", "/"), *((letter, letter) for letter in "res")):
            app.post_message(events.Key(key, character))  # as the terminal's driver posts them, one read at once
        field = app.main.query_one("#model-filter")
        await wait_until(pilot, lambda: field.value == "res", what="the letters in the filter",
                         shown=lambda: repr(field.value))
        assert "time" not in [kind for kind, _ in fake.requests]  # r ran nothing
        assert app.main.focused is field
        # in a text field '/' is a character, not the filter's key
        custom = app.main.query_one("#custom-model")
        app.main.set_focus(custom)
        await pilot.press("a", "slash", "b")
        await wait_until(pilot, lambda: custom.value == "a/b", what="a slash typed in a field",
                         shown=lambda: repr(custom.value))
        assert app.main.focused is custom


async def test_typing_hf_then_a_name_chooses_the_transformers_model_and_seq_shows_its_default_length():
    app, _ = sources_app()
    async with app.run_test(size=(110, 34)) as pilot:
        await wait_ready(pilot)
        await pilot.press("slash", *"hf:gpt2")
        await wait_until(pilot, lambda: highlighted_id(app) == "hf:gpt2", what="hf:gpt2 highlighted")
        assert listed(app)[0] == "transformers"
        assert "hf:gpt_neox" not in listed(app)  # 'gpt2' is not in it in order
        await pilot.press("enter")
        await wait_until(pilot, lambda: analysed(app, "hf:gpt2"), what="the analysis of hf:gpt2")
        assert app.main.query_one("#seq-len").placeholder == "128"
        assert "hf:gpt2" in screen_text(app, "#model-summary")


async def test_without_a_prefix_every_source_is_listed_under_its_heading_and_the_rest_are_counted():
    app, _ = sources_app()
    async with app.run_test(size=(110, 34)) as pilot:
        await wait_ready(pilot)
        lines = listed(app)
        assert lines[0] == "torchvision · classification"
        for heading in ("torchvision · detection", "timm", "transformers"):
            assert heading in lines
        assert any(line.startswith("… ") and "more: type to narrow" in line for line in lines)  # timm's 306
        await pilot.press("slash", *"resnet18")
        await wait_until(pilot, lambda: "timm:resnet18" in listed(app), what="the filter applied")
        lines = listed(app)
        assert lines[:2] == ["torchvision · classification", "resnet18"]
        assert highlighted_id(app) == "resnet18"
        assert lines.index("timm") < lines.index("timm:resnet18")


async def choose_gpt2(pilot, app) -> None:
    """Once the app is ready: hf:gpt2 typed in the filter and chosen, and its analysis shown."""
    await wait_ready(pilot)
    await pilot.press("slash", *"hf:gpt2", "enter")
    await wait_until(pilot, lambda: analysed(app, "hf:gpt2"), what="the analysis of hf:gpt2")


async def test_args_and_seq_reach_the_selection_the_analysis_and_the_run():
    app, fake = sources_app()
    async with app.run_test(size=(110, 34)) as pilot:
        await choose_gpt2(pilot, app)
        assert app.main.query_one("#shape").value == "128"  # the default length, as analysed
        await pilot.click("#model-args")
        await paste(pilot, GPT2_ARGS, "enter")
        await wait_until(pilot, lambda: analyses(fake)[-1].get("model_args") == (("n_layer", "2"), ("n_embd", "64"),
                                                                                 ("n_head", "2")),
                         what="the analysis with the overrides")
        await wait_until(pilot, lambda: analysed(app, "hf:gpt2"), what="the analysis at the overrides")
        await pilot.click("#seq-len")
        await pilot.press(*"32", "enter")
        await wait_until(pilot, lambda: analyses(fake)[-1].get("seq_len") == 32, what="the analysis at length 32")
        # The shape shown was the default: the length typed decides it, and the analysis fills it in again.
        assert analyses(fake)[-1]["input_shape"] is None
        await wait_until(pilot, lambda: analysed(app) and app.pane("picker").complexity.input_shape == (1, 32),
                         what="the analysis at length 32 shown")
        assert app.main.query_one("#shape").value == "32"
        selection = app.main.selection()
        assert (selection.model_args, selection.seq_len) == (GPT2_ARGS, "32")
        await pilot.press("escape", "r")
        await wait_until(pilot, lambda: any(kind == "time" for kind, _ in fake.requests), what="the run asked for")
        cfg = next(params["cfg"] for kind, params in fake.requests if kind == "time")
        assert cfg.model == "hf:gpt2"
        assert cfg.model_args == (("n_layer", "2"), ("n_embd", "64"), ("n_head", "2"))


async def in_gpt2s_args(pilot, app, fake) -> int:
    """hf:gpt2 chosen and analysed, the args field clicked: the count of analyses asked so far."""
    await choose_gpt2(pilot, app)
    asked = len(analyses(fake))
    await pilot.click("#model-args")
    return asked


async def test_a_bad_override_is_one_line_where_the_picker_says_errors_and_the_app_keeps_running():
    app, fake = sources_app()
    async with app.run_test(size=(110, 34)) as pilot:
        asked = await in_gpt2s_args(pilot, app, fake)
        await pilot.press(*"n_layer", "enter")  # no '=': the engine's parser refuses it before any job
        await wait_until(pilot, lambda: "is not KEY=VALUE" in screen_text(app, "#model-summary"),
                         what="the parser's line in the model's summary")
        assert any("'n_layer' is not KEY=VALUE" in message for message in notifications(app))
        assert len(analyses(fake)) == asked
        field = app.main.query_one("#model-args")
        field.value = ""
        await pilot.click("#model-args")  # ⏎ left the field for the model list
        await pilot.press(*"bogus=1", "enter")  # well formed, but the model has no such setting: the job says so
        await wait_until(pilot, lambda: "has no setting 'bogus'" in screen_text(app, "#model-summary"),
                         what="the engine's line for an unknown setting")
        shape = app.main.query_one("#shape")
        assert (shape.value, shape.placeholder) == ("", "128")  # the last default, greyed, not an image's shape
        field.value = ""
        await pilot.click("#model-args")
        await pilot.press("enter")  # no overrides: analysed again
        await wait_until(pilot, lambda: analysed(app, "hf:gpt2"), what="the analysis without overrides")
        assert app.is_running


async def test_a_model_chosen_past_what_the_list_shows_is_filtered_for_and_highlighted_and_a_custom_one_is_not():
    # As with --model or the demo's hf:llama: the list shows its first 60 timm names, not this one, and its
    # highlight must not rest on another model (the first of the list) while this one is analysed and run.
    app, _ = sources_app(model="timm:test_net_250")
    async with app.run_test(size=(110, 34)) as pilot:
        await wait_ready(pilot)
        await wait_until(pilot, lambda: analysed(app, "timm:test_net_250"), what="the analysis of the model given")
        assert highlighted_id(app) == "timm:test_net_250"
        assert app.main.query_one("#model-filter").value == "timm:test_net_250"
        await pilot.click("#custom-model")
        await paste(pilot, "mypkg.nets:make_net", "enter")
        await wait_until(pilot, lambda: analysed(app, "mypkg.nets:make_net"), what="the analysis of the custom model")
        assert highlighted_id(app) is None  # not in the catalogue: nothing highlighted, not the model before


async def test_args_left_with_tab_are_analysed_as_with_enter_and_enter_hands_the_keys_back():
    # A new user typed a llama's overrides and left the field with Tab: the run took them, but the model's line and
    # the layer table still showed the default config's 6.74 G parameters.
    app, fake = sources_app()
    async with app.run_test(size=(110, 34)) as pilot:
        asked = await in_gpt2s_args(pilot, app, fake)
        await paste(pilot, GPT2_ARGS, "tab")
        await wait_until(pilot, lambda: len(analyses(fake)) > asked
                         and analyses(fake)[-1].get("model_args") == (("n_layer", "2"), ("n_embd", "64"), ("n_head", "2")),
                         what="the analysis with the overrides, on leaving the field")
        await wait_until(pilot, lambda: analysed(app, "hf:gpt2"), what="the analysis shown")
        asked = len(analyses(fake))
        await pilot.click("#seq-len")
        await pilot.press("tab")  # left as analysed: not analysed again
        await pilot.click("#seq-len")
        await pilot.press(*"32", "enter")
        await wait_until(pilot, lambda: analyses(fake)[-1].get("seq_len") == 32, what="the analysis at length 32")
        assert len(analyses(fake)) == asked + 1
        assert app.main.focused is app.main.query_one("#model-list")  # ⏎: the next key is a command, not text
