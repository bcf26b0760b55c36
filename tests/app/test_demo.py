"""The hands-free demo: it plays its steps on its own, announced in a banner, and any key takes over."""

from __future__ import annotations

import pytest

from tests.app.helpers import TINY, make_app, screen_text, wait_until
from torchperf_tui.app.demo import story
from torchperf_tui.engine.measurements.flags import Flags


def banner(app) -> str:
    return screen_text(app, "#demo-banner")


async def test_the_demo_plays_its_first_steps_hands_free_with_cpu_analogues():
    app = make_app(model=TINY, demo=True, demo_pace=0.0, warmup=1, iters=5)
    async with app.run_test(size=(110, 34)) as pilot:
        await wait_until(pilot, lambda: "demo 1/7" in banner(app), what="step 1")
        assert "oneDNN on vs off, fixed shape" in banner(app) and "GPU-only" in banner(app)
        assert "any key takes over" in banner(app)
        await wait_until(pilot, lambda: "demo 2/7" in banner(app), what="step 2")
        # step 1 was an interleaved comparison of oneDNN on (A) against off (B), with a verdict
        first_b = app.session.runs.get(2)
        assert first_b.arm == "B" and first_b.status == "done" and first_b.verdict is not None
        assert app.session.runs.get(1).flags.mkldnn_enabled and not first_b.flags.mkldnn_enabled
        await wait_until(pilot, lambda: app.session.runs.get(4) is not None and app.session.runs.get(4).finished,
                         what="step 2's A/B")
        assert app.session.runs.get(4).arm == "B" and app.session.runs.get(4).shapes == "random"
        await wait_until(pilot, lambda: "demo 3/7" in banner(app), what="step 3")
        await wait_until(pilot, lambda: "demo 4/7" in banner(app), timeout=180, what="step 4")
        assert "a training step" in banner(app)
        await wait_until(pilot, lambda: "demo 5/7" in banner(app), timeout=180, what="step 5")
        assert "int8 weight-only (torchao) against float32" in banner(app)
        await wait_until(pilot, lambda: "demo 7/7" in banner(app), timeout=180, what="the end")
        # step 5 compared the same flags, B's Linear layers in int8 weights: its drift and prediction beside the verdict
        quant_b = app.session.runs.get(10)
        assert quant_b.arm == "B" and quant_b.status == "done" and quant_b.input_text.endswith("quant int8wo")
        verdict = " ".join(screen_text(app, "#compare-verdict").split())
        assert "arm B quantization: int8wo on 0 Linear" in verdict and "prediction:" in verdict
        # step 4 compared a training step under deterministic algorithms off and on, then checked its gradients
        train_b = app.session.runs.get(8)
        assert train_b.arm == "B" and train_b.status == "done" and train_b.step.startswith("train")
        assert app.pane("timing").last_determinism.step == "train" and app.pane("memory").last_release is not None
        assert app.pane("options").options["step"] == "infer"  # and put the step back
        assert app.pane("flags").flags == Flags()  # the demo put the flags back
        assert not app.demo.running


async def test_any_key_takes_over_from_the_demo():
    app = make_app(model=TINY, demo=True, demo_pace=30.0, warmup=1, iters=5)
    async with app.run_test(size=(110, 34)) as pilot:
        await wait_until(pilot, lambda: "demo 1/7" in banner(app), what="step 1")
        await pilot.press("2")  # a user switches to Compare: the demo stops, the key still works
        assert not app.demo.running and "the keys are yours" in banner(app)
        assert app.main.active_tab() == "compare"
        await pilot.pause(0.5)
        assert app.pane("compare").ab_runs is None  # the step never started its comparison


def test_the_story_names_the_gpu_flags_on_a_gpu():
    titles = " ".join(step.title for step in story(on_gpu=True))
    assert "cudnn.benchmark off vs on" in titles and "cudnn.deterministic" in titles and "GPU-only" not in titles


@pytest.mark.parametrize("capability, device, fp8", [("9.0", "auto", True), ("8.9", "cuda:0", True),
                                                     ("8.6", "auto", False), ("NA", "auto", False),
                                                     ("9.0", "cuda:1", False)])
def test_the_low_precision_step_is_float8_against_bfloat16_on_a_gpu_that_runs_it(capability, device, fp8):
    from types import SimpleNamespace

    from torchperf_tui.app.demo import FP8_STEP, QUANT_STEP, quant_installed, runs_float8

    report = SimpleNamespace(gpus=[SimpleNamespace(compute_capability=capability)])
    assert runs_float8(report, device) is fp8
    titles = [step.title for step in story(on_gpu=True, fp8=runs_float8(report, device))]
    if quant_installed():
        assert (FP8_STEP[0] in titles, QUANT_STEP[0] in titles) == (fp8, not fp8)


TINY_ATTENTION = ("num_hidden_layers=2,hidden_size=64,intermediate_size=128,num_attention_heads=4,num_key_value_heads=4,"
                  "vocab_size=256,max_position_embeddings=256,attention_dropout=0.1")


@pytest.mark.own_process  # in full runs beside the shared process its A/B's B arm ended cancelled (alone it passes)
async def test_a_transformers_demo_tells_the_attention_story_step_by_step():
    """`--demo hf:llama`: math against flash with a verdict, the kernel each ran, a fallback with its reason, the
    sweep's two arms, generation's per-token histogram; each step announced; the flags put back."""
    from torchperf_tui.app.demo_attention import STEPS

    app = make_app(model="hf:llama", model_args=TINY_ATTENTION, seq_len="64", demo=True, demo_pace=0.0, warmup=1,
                   iters=5)
    total = len(STEPS) + 1
    async with app.run_test(size=(110, 34)) as pilot:
        await wait_until(pilot, lambda: f"demo 1/{total}" in banner(app), timeout=120, what="step 1")
        assert "SDPA math against flash at sequence 64" in banner(app)
        await wait_until(pilot, lambda: f"demo 2/{total}" in banner(app), timeout=180, what="step 2")
        a, b = app.session.runs.get(1), app.session.runs.get(2)
        assert (a.arm, a.flags.sdpa, b.arm, b.flags.sdpa) == ("A", "math", "B", "flash")
        assert b.status == "done" and b.verdict is not None
        await wait_until(pilot, lambda: f"demo 3/{total}" in banner(app), timeout=180, what="step 3")
        kernels = app.pane("kernels").result
        assert [(s.a.ran, s.b.ran) for s in kernels.attention] == [("math", "flash")] * 2
        await wait_until(pilot, lambda: f"demo 4/{total}" in banner(app), timeout=180, what="step 4")
        assert "flash allowed, math ran" in banner(app) or "flash allowed, math ran" in screen_text(app, "#kernels-note")
        note = screen_text(app, "#kernels-note")
        assert "B: flash allowed, math ran at model.layers.0.self_attn and 1 more site: dropout" in note
        assert app.pane("options").options["step"] == "infer"  # the training step was put back
        await wait_until(pilot, lambda: f"demo 5/{total}" in banner(app), timeout=300, what="step 5")
        sweep = app.pane("sweep").result
        assert {p.arm for p in sweep.points} == {"A", "B"} and {p.length for p in sweep.points} == {128, 256}
        await wait_until(pilot, lambda: f"demo {total}/{total}" in banner(app), timeout=300, what="the end")
        generation = app.pane("generation").result
        assert generation is not None and len(generation.decode_ms) > 0 and generation.ttft_ms
        assert app.pane("flags").flags == Flags() and app.pane("flags").previous is None
        assert not app.demo.running and "g generates" in banner(app)


def test_the_attention_story_plays_a_small_config_unless_overrides_are_given():
    from torchperf_tui.app.demo_attention import SMALL_CONFIGS, attention_steps, demo_inputs

    assert demo_inputs("hf:llama", "", "") == (SMALL_CONFIGS["hf:llama"], "1024")
    assert demo_inputs("hf:llama", "num_hidden_layers=1", "256") == ("num_hidden_layers=1", "256")
    assert demo_inputs("resnet18", "", "") == ("", "")  # the cuDNN story: nothing added
    assert "a float32 model" in attention_steps(True, "1024")[2][1]
    assert "attention dropout" in attention_steps(False, "1024")[2][1]
