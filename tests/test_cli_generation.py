"""`bench MODEL --generate N --prompt-len P`: the time to first token, the per-token latency, tokens/s and the KV
cache in words and in --json, a history record of kind "generate", and bad input as one line with exit 2."""

from __future__ import annotations

import json

import pytest

from tests.cli_run import run

TINY_LLAMA = ("num_hidden_layers=2,hidden_size=64,intermediate_size=128,num_attention_heads=4,num_key_value_heads=4,"
              "vocab_size=256")
LLAMA = ("hf:llama", "--model-args", TINY_LLAMA)  # the model as the commands take it


@pytest.fixture(autouse=True)
def _jobs_in_this_process(monkeypatch, tmp_path):
    """The job runs in this process (as in tests/test_cli.py); the history is the test's own."""
    from tests.measure.in_process import InProcessMeasurement

    monkeypatch.setattr("torchperf_tui.measure.cli_jobs.MeasurementProcess", InProcessMeasurement)
    monkeypatch.setenv("TORCHPERF_HISTORY", str(tmp_path / "history.jsonl"))


def bench(capsys, *extra):
    return run(capsys, "bench", *LLAMA, *extra)


def test_generate_says_ttft_per_token_latency_tokens_per_second_and_the_cache(capsys):
    code, out, err = bench(capsys, "--generate", "4", "--prompt-len", "8")
    assert code == 0, err
    assert out.startswith("generation: hf:llama (num_hidden_layers=2,")
    for words in ("greedy, the model's own KV cache, 4 new tokens after a 8-token prompt, synchronised per token",
                  "time to first token", "per-token latency", "over 15 decode steps (3 per run)", "tokens/s",
                  "KV cache", "11 positions: the 8-token prompt + 4 new tokens - 1",
                  "decode reads", "the mean of 3 decode steps: the first", "at 9 positions", "at 11 positions",
                  " GB/s (the bytes a step reads / the per-token median)",
                  "no measured copy ceiling: measure it (C / torchperf-tui ceilings)"):
        assert words in out


def test_generate_json_carries_bytes_per_step_bandwidth_and_mbu_against_the_kept_copy_ceiling(capsys, monkeypatch):
    """`bench hf:gpt2 --generate 32 --json` (a small gpt2): the bytes a decode step reads, the GB/s they make over the
    per-token median, and MBU against the copy ceiling kept for the device (a fake one here)."""
    from torchperf_tui.engine.hardware.ceilings import Ceiling, CeilingsResult

    copy = Ceiling(kind="copy", dtype="float32", value=20e9, size="256.0 MiB", median_s=0.1, reps=3, workload="copy")
    monkeypatch.setattr("torchperf_tui.engine.measurements.decode_bandwidth.kept_for",
                        lambda device, on_corrupt=None: CeilingsResult("cpu", "fake", 0.0, ceilings=[copy]))
    code, out, err = run(capsys, "bench", "hf:gpt2", "--model-args", "n_layer=2,n_embd=32,n_head=2,vocab_size=256",
                         "--generate", "32", "--prompt-len", "8", "--json", "--no-history")
    assert code == 0, err
    data = json.loads(out)
    params = 256 * 32 + 1024 * 32 + 2 * (12 * 32 * 32 + 13 * 32) + 2 * 32  # 12e² + 13e a block; the LM head tied
    kv_mean = 2 * 2 * 32 * 4 * (8 + 32 / 2)  # positions 9 .. 39, 24 on average
    assert data["decode_bytes"]["weight_bytes"] == params * 4 and data["bytes_per_step"] == params * 4 + kv_mean
    assert data["bandwidth_gbs"] == pytest.approx(data["bytes_per_step"] / data["decode_stats"]["p50_ms"] / 1e6)
    assert data["mbu_pct"] == pytest.approx(100 * data["bandwidth_gbs"] / 20) and data["copy_ceiling_gbs"] == 20.0


def test_generate_json_and_its_history_record(capsys, tmp_path):
    code, out, err = bench(capsys, "--generate", "3", "--prompt-len", "6", "--json")
    assert code == 0, err
    data = json.loads(out)
    assert data["new_tokens"] == 3 and data["prompt_len"] == 6 and data["decode_steps"] == 2
    assert data["ttft_stats"]["n"] == 5 and data["decode_stats"]["n"] == 10 and data["tokens_per_s"] > 0
    assert data["kv_cache_bytes"] == 2 * 2 * 1 * 4 * (6 + 3 - 1) * 16 * 4
    assert "decode_ms" not in data  # every sample only with --samples
    records = [json.loads(line) for line in (tmp_path / "history.jsonl").read_text().splitlines()]
    assert [r["kind"] for r in records] == ["generate"] and records[0]["details"]["new_tokens"] == 3
    code, out, _ = run(capsys, "history")
    assert code == 0 and "3 new tokens after 6" in out and "TTFT" in out


def test_the_prompt_length_defaults_to_the_sequence_length(capsys):
    code, out, err = bench(capsys, "--generate", "2", "--seq-len", "5", "--json", "--no-history")
    assert code == 0, err
    assert json.loads(out)["prompt_len"] == 5


@pytest.mark.parametrize("argv, words", [
    (("bench", "tests.tinymodels:tiny_cnn", "--generate", "4"), "generation needs a causal language model"),
    (("bench", *LLAMA, "--generate", "0"), "argument --generate"),
    (("bench", *LLAMA, "--generate", "1"), "give at least 2 new tokens"),
    (("bench", *LLAMA, "--generate", "4", "--prompt-len", "0"), "argument --prompt-len"),
    (("bench", *LLAMA, "--generate", "10", "--prompt-len", "2040"),
     "a 2040-token prompt and 10 new tokens need 2049 positions, past the model's maximum of 2048"),
    (("bench", *LLAMA, "--generate", "4", "--prompt-len", "4096"), "past the model's maximum positions"),
    (("bench", *LLAMA, "--prompt-len", "8"), "--prompt-len goes with --generate"),
    (("bench", *LLAMA, "--cache", "static"), "--cache static goes with --generate"),
    (("bench", *LLAMA, "--generate", "4", "--cache", "full"), "unknown KV cache 'full': choose dynamic or static"),
    (("compare", *LLAMA, "--a", "", "--b", "cache=static"),
     "cache static: a KV cache is a generation's (--generate N)"),
    (("bench", *LLAMA, "--generate", "4", "--modes", "sync"), "leave out --modes"),
    (("bench", *LLAMA, "--generate", "4", "--prompt-len", "8", "--seq-len", "9"), "give one of them"),
    (("bench", *LLAMA, "--generate", "4", "--step", "train"), "leave out --step train"),
])
def test_bad_generate_input_is_one_line_and_exit_2(capsys, argv, words):
    code, out, err = run(capsys, *argv)
    assert code == 2 and out == ""
    assert words in err and len(err.strip().splitlines()) == 1, err


def test_compare_generate_gives_a_verdict_on_decode_and_the_prefill_apart(capsys):
    code, out, err = run(capsys, "compare", *LLAMA, "--generate", "3", "--prompt-len",
                         "6", "--a", "", "--b", "threads=1", "--blocks", "6", "--json")
    assert code == 0, err
    data = json.loads(out)
    assert data["decode_verdict"]["blocks"] == 6 and data["prefill_verdict"]["blocks"] == 6
    assert data["summary"].startswith("decode (per output token): ")
    for arm in ("a", "b"):
        assert len(data[arm]["ttft_ms"]) == 6 and [len(block) for block in data[arm]["decode_blocks"]] == [2] * 6
        assert data[arm]["per_token_median_ms"] > 0 and data[arm]["bandwidth_gbs"] > 0
    assert data["b"]["flags"]["num_threads"] == 1
    code, out, err = run(capsys, "compare", *LLAMA, "--generate", "3", "--prompt-len",
                         "6", "--a", "", "--b", "threads=1", "--blocks", "6")
    assert code == 0 and "\ndecode " in out and "prefill (apart)" in out and "arm B            threads=1" in out
    assert out.count(" GB/s") >= 2  # each arm's bandwidth


@pytest.mark.parametrize("extra, words", [
    (("--a", "", "--b", "step=train"), "a generation A/B compares flags, dtype, quant, attn and cache"),
    (("--a", "", "--b", "cache=stati"), "unknown KV cache 'stati': choose dynamic or static"),
    (("--a", "cache=static", "--b", "cache=static"), "nothing to compare"),
    (("--a", "", "--b", "threads=1", "--kernels"), "leave out --generate"),
    (("--a", "", "--b", ""), "nothing to compare"),
    (("--a", "", "--b", "threads=1", "--blocks", "6", "--prompt-len", "4096"), "past the model's maximum positions"),
])
def test_bad_compare_generate_input_is_one_line_and_exit_2(capsys, extra, words):
    code, out, err = run(capsys, "compare", *LLAMA, "--generate", "3", *extra)
    assert code == 2 and out == ""
    assert words in err and len(err.strip().splitlines()) == 1, err


def test_a_static_cache_is_compared_with_the_dynamic_one_and_kept_apart_in_the_history(capsys):
    """compare --generate --b cache=static: each arm's cache in its --json, B's compiled decode in the method; bench
    --generate --cache static: its compile said apart, and its history record not like for like with a dynamic one."""
    from torchperf_tui.engine.records.history_compare import compare_records
    from torchperf_tui.engine.records.history_file import HistoryFile

    code, out, err = run(capsys, "compare", *LLAMA, "--generate", "3", "--prompt-len",
                         "6", "--a", "", "--b", "cache=static", "--blocks", "6", "--time-budget", "0", "--json")
    assert code == 0, err
    data = json.loads(out)
    # no time budget: B's compile of its decode step took the default 120 s on a slow box under load, and the
    # blocks that verdict needs were never started
    assert (data["a"]["cache"], data["b"]["cache"]) == ("dynamic", "static") and data["decode_verdict"]["blocks"] == 6
    assert "arm B: a static KV cache (transformers' StaticCache" in data["method"]
    for kind in ("dynamic", "static"):
        code, out, err = bench(capsys, "--generate", "3", "--prompt-len", "6", "--cache", kind)
        assert code == 0, err
        assert ("\ncompile " in out) == (kind == "static")
    records = HistoryFile().load().records
    assert [r.details.get("cache") for r in records] == [None, "static"]
    assert records[1].details["compile_ms"] > 0
    assert compare_records(records[0], records[1]).setup_diff == {"cache": (None, "static")}
