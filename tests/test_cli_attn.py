"""--attn (an arm's attn=): a transformers model's attention implementation, refused in one line where the model or
the box cannot take it, kept in the JSON and the history, compared in an A/B and a sweep."""

from __future__ import annotations

import json

import pytest

from tests.cli_run import run
from torchperf_tui.engine.records.history_file import HistoryFile

LLAMA = ["hf:llama", "--model-args", "num_hidden_layers=1,hidden_size=64,intermediate_size=128,num_attention_heads=4,"
         "num_key_value_heads=4,vocab_size=256", "--seq-len", "32", "--device", "cpu"]


@pytest.mark.parametrize("argv, words", [
    (["bench", "tests.tinymodels:quant_mlp", "--input", "1x32", "--attn", "eager"],
     "attn eager: an attention implementation is a transformers model's setting (hf:...); "
     "tests.tinymodels:quant_mlp is not one"),
    (["bench", *LLAMA, "--attn", "fa2"], "attn flash_attention_2 runs on CUDA only (flash_attn's kernels)"),
    (["bench", "hf:gpt2", "--model-args", "n_layer=1,n_embd=32,n_head=2", "--seq-len", "8", "--attn", "flex"],
     "attn flex_attention: GPT2LMHeadModel does not support an attention implementation through torch's "
     "flex_attention (transformers); its class supports others: try eager or sdpa"),
    (["compare", *LLAMA, "--a", "", "--b", "attn=paged"],
     "unknown attention implementation 'paged': choose eager, sdpa, flex_attention or flash_attention_2"),
])
def test_what_the_model_or_the_box_cannot_take_is_one_line_and_exit_2(capsys, argv, words):
    code, out, err = run(capsys, *argv, "--no-history")
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1 and words in err


def test_a_run_with_an_attention_implementation_says_it_and_keeps_it(capsys, tmp_path):
    history = tmp_path / "h.jsonl"
    code, out, err = run(capsys, "--history", str(history), "bench", *LLAMA, "--attn", "eager", "--iters", "3",
                         "--warmup", "0", "--json")
    assert code == 0, err
    assert json.loads(out)["attn"] == "eager"
    record = HistoryFile(history).load().records[0]
    assert record.config["attn"] == "eager" and record.details["attn"] == "eager" and record.setup()["attn"] == "eager"
    code, out, _ = run(capsys, "--history", str(history), "history")
    assert code == 0 and "attn eager" in out


def test_eager_against_sdpa_is_an_ab_with_a_verdict(capsys):
    code, out, err = run(capsys, "compare", *LLAMA, "--a", "attn=eager", "--b", "attn=sdpa", "--blocks", "6",
                         "--per-block", "2", "--no-history")
    assert code == 0, err
    assert " A    attn=eager" in out and " B    attn=sdpa" in out
    assert any(line.startswith(("B is", "no significant difference")) for line in out.splitlines())


def test_the_arms_of_a_sweep_may_differ_in_attention(capsys):
    code, out, err = run(capsys, "sweep", *LLAMA[:3], "--seq-lens", "16-32", "--a", "attn=eager", "--b", "attn=sdpa",
                         "--iters", "2", "--warmup", "0")
    assert code == 0, err
    assert "B/A" in out and "A: up to 32 tokens" in out
