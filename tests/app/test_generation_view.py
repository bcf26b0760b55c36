"""Generation in the Timing tab (key g): a causal LM generates in the measurement process, its per-token latencies
fill a histogram of their own, the figures and the method are said, a record of kind "generate" is kept; a model
that is not a causal LM is refused in one line and the app keeps running."""

from __future__ import annotations

import json

from tests.app.helpers import choose_model, notifications, screen_text, wait_until

TINY_LLAMA_CONFIG = {"model_type": "llama", "num_hidden_layers": 2, "hidden_size": 64, "intermediate_size": 128,
                     "num_attention_heads": 4, "num_key_value_heads": 4, "vocab_size": 256,
                     "max_position_embeddings": 512}


async def test_g_generates_with_a_causal_lm_and_fills_the_per_token_histogram(tiny_app, tmp_path):
    model_dir = tmp_path / "tiny-llama"
    model_dir.mkdir()
    (model_dir / "config.json").write_text(json.dumps(TINY_LLAMA_CONFIG))
    history = tmp_path / "history.jsonl"
    async with tiny_app(size=(120, 40), history_path=str(history)) as pilot:
        app = pilot.app
        spec = f"hf:{model_dir}"
        await choose_model(pilot, spec, "16")  # the input's sequence length is the prompt's
        await pilot.press("3", "g")  # pressed on another tab, g shows the Timing tab, where its section is
        assert app.main.active_tab() == "timing"
        view = app.main.query_one("#generation")
        await wait_until(pilot, lambda: view.result is not None, what="the generation")
        text = screen_text(app, "#generation-lines")
        assert text.startswith(f"generate {spec} · 64 new tokens after the prompt 1x16 float32")
        assert "TTFT " in text and "per token p50 " in text and "tokens/s" in text and "KV cache " in text
        assert "decode reads " in text and " GB/s · no measured copy ceiling: measure it (C / torchperf-tui ceilings)" \
            in text  # the test's own ceilings file: none kept
        assert "greedy, the model's own KV cache, 64 new tokens after a 16-token prompt, synchronised per token" in text
        histogram = app.main.query_one("#generation-histogram")
        assert len(histogram.samples) == 5 * 63 == len(view.result.decode_ms)
        assert "per output token" in histogram.title
        assert histogram.display and not app.main.query_one("#latency-histogram").display  # its place, taken
        await wait_until(pilot, lambda: history.exists() and "generate" in history.read_text(), what="the record")
        assert json.loads(history.read_text().splitlines()[-1])["details"]["new_tokens"] == 64
        await pilot.press("r")  # a timing run after the generation takes the histogram back; the figures stay
        await wait_until(pilot, lambda: app.main.query_one("#latency-histogram").display, what="the run's histogram")
        assert not histogram.display and "TTFT " in screen_text(app, "#generation-lines")


async def test_g_on_a_model_that_is_not_a_causal_lm_says_why_in_one_line(tiny_app):
    async with tiny_app(size=(120, 40)) as pilot:
        app = pilot.app
        await pilot.press("g")
        await wait_until(pilot, lambda: "error" in screen_text(app, "#generation-lines"), what="the refusal")
        text = screen_text(app, "#generation-lines")
        assert "generation needs a causal language model" in text and len(text.splitlines()) == 1
        assert any("generation needs a causal language model" in n for n in notifications(app))
        await choose_model(pilot, "tests.tinymodels:threads_probe", "3x32x32")
        assert not app.main.query_one("#generation").display  # it was another model's
