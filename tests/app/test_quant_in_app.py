"""Quantization and the attention implementation in the app: the sidebar's select beside the graph mode starts a
quantized run, whose lines say what was converted and how far the outputs drifted, and whose history record keeps
both; the one beside the shape schedule asks a transformers model's attention, and is refused for any other."""

from __future__ import annotations

from textual.widgets import Select

from tests.app.helpers import choose_model, make_app, notifications, screen_text, wait_ready, wait_until
from torchperf_tui.engine.records.history_file import HistoryFile

MLP = "tests.tinymodels:quant_mlp"


async def test_choosing_a_scheme_runs_the_model_quantized_and_says_its_drift(tmp_path):
    path = tmp_path / "runs.jsonl"
    app = make_app(warmup=1, iters=5, history_path=str(path))
    async with app.run_test(size=(110, 40)) as pilot:
        await wait_ready(pilot)
        await choose_model(pilot, MLP, "32")
        select = app.main.query_one("#option-quant", Select)
        assert select.value == "off"  # 'no quant' until chosen
        select.value = "int8wo"  # as a user picks it: a new run starts
        await wait_until(pilot, lambda: app.session.runs.get(1) is not None and app.session.runs.get(1).finished,
                         what="the quantized run")
        run = app.session.runs.get(1)
        assert run.input_text == "1x32 float32 quant int8wo"  # not like for like with an unquantized run
        assert app.main.selection().config().quant == "int8wo"
        stats = " ".join(screen_text(app, "#run-stats").split())
        assert "quantization: int8wo: 2 Linear converted (body.0, body.2); 1 layer left as it was: 1 too small" in stats
        assert "drift: SQNR " in stats and "against the float32 model at full precision" in stats
        await wait_until(pilot, lambda: path.exists() and HistoryFile(str(path)).load().records, what="the record")
        record = HistoryFile(str(path)).load().records[-1]
        assert record.config["quant"] == "int8wo" and record.details["drift"]["sqnr_db"] == run.result.drift.sqnr_db
        # In A/B mode a change of scheme compares the model as it was (A) against as chosen now (B), interleaved.
        app.main.query_one("#option-flip", Select).value = "ab"
        select.value = "off"
        await wait_until(pilot, lambda: app.session.runs.get(3) is not None and app.session.runs.get(3).finished,
                         what="the A/B of int8wo against none")
        a, b = app.session.runs.get(2), app.session.runs.get(3)
        assert (a.arm, a.input_text, b.arm, b.input_text) == ("A", "1x32 float32 quant int8wo", "B", "1x32 float32")
        assert b.status == "done" and b.verdict is not None
        verdict = " ".join(screen_text(app, "#compare-verdict").split())
        # the pane's short form: the runs table stays in sight below it
        assert "arm A quantization: int8wo on 2 Linear, 1 left" in verdict and "B against A: SQNR" in verdict
        assert "prediction: " in verdict
        app.main.query_one("#option-flip", Select).value = "run"
        # The attention implementation is a transformers model's: asked of this one, the run is refused in one line.
        assert app.main.query_one("#option-attn", Select).value == "default" and app.main.selection().attn is None
        app.main.query_one("#option-attn", Select).value = "eager"
        await wait_until(pilot, lambda: app.session.runs.get(4) is not None and app.session.runs.get(4).finished,
                         what="the refused run")
        assert app.session.runs.get(4).status == "failed" and app.main.selection().config().attn == "eager"
        assert any("attn eager: an attention implementation is a transformers model's setting" in line
                   for line in notifications(app))
