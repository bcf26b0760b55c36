"""Generation of a causal LM (engine/measurements/generation.py): the figures, the number of decode steps, the KV
cache's size against what the config implies, the tokens against model.generate's, the stream, a cancel, and every
refusal in one line before anything is built. Tiny llama configs on the CPU, a few tokens."""

from __future__ import annotations

import dataclasses
import json
import math

import pytest
import torch

from torchperf_tui.engine.measurements.bench_config import BenchConfig
from torchperf_tui.engine.measurements.generation import GreedyLoop, cache_bytes, method_text, run_generation
from torchperf_tui.engine.records.fleet_records import setup_name
from torchperf_tui.core.errors import ModelError, ShapeError, TorchperfError
from torchperf_tui.engine.workloads.model_args import parse_model_args
from torchperf_tui.wording.history import history_line

# Grouped-query attention (4 query heads, 2 key/value heads): the cache's size follows the key/value heads.
LAYERS, HIDDEN, HEADS, KV_HEADS = 2, 64, 4, 2
TINY_LLAMA = parse_model_args(f"num_hidden_layers={LAYERS},hidden_size={HIDDEN},intermediate_size=128,"
                              f"num_attention_heads={HEADS},num_key_value_heads={KV_HEADS},vocab_size=256")


def config(**overrides) -> BenchConfig:
    values = dict(model="hf:llama", model_args=TINY_LLAMA, device="cpu", seq_len=8, time_budget_s=None)
    values.update(overrides)
    return BenchConfig(**values)


@pytest.fixture(scope="module")
def generated():
    """One generation of 5 tokens after an 8-token prompt at batch 2, 2 timed runs, and what it streamed."""
    streamed = []
    result = run_generation(config(batch=2), 5, runs=2, on_sample=lambda *s: streamed.append(s))
    return result, streamed


def test_ttft_and_per_token_figures_are_present_and_positive(generated):
    result, _ = generated
    assert result.runs == 2 and len(result.ttft_ms) == 2 and all(ms > 0 for ms in result.ttft_ms)
    assert result.warmup_ttft_ms > 0 and len(result.warmup_decode_ms) == 4
    assert result.ttft_stats.p50_ms > 0 and result.decode_stats.p50_ms > 0
    assert result.decode_stats.p90_ms >= result.decode_stats.p50_ms
    assert not result.cancelled and result.timer == "perf_counter"
    assert result.method == method_text(5, 8) == ("greedy, the model's own KV cache, 5 new tokens after a 8-token "
                                                  "prompt, synchronised per token")


def test_n_new_tokens_take_one_prefill_and_n_minus_1_decode_steps_per_run(generated):
    result, _ = generated
    assert result.decode_steps == 4
    assert len(result.decode_ms) == result.runs * 4 == result.decode_stats.n


def test_tokens_per_second_is_the_batch_over_the_per_token_median(generated):
    result, _ = generated
    assert result.batch == 2
    assert math.isclose(result.tokens_per_s, 2 * 1000.0 / result.decode_stats.p50_ms)


def test_kv_cache_bytes_equal_what_the_config_implies_at_prompt_plus_new_minus_one_positions(generated):
    """2 (keys and values) x layers x batch x key/value heads x positions x head_dim x itemsize, with the cache
    holding P + N - 1 positions: the N-th token is produced and never fed back."""
    result, _ = generated
    head_dim = HIDDEN // HEADS
    positions = 8 + 5 - 1
    assert result.kv_cache_positions == positions
    assert result.kv_cache_bytes == 2 * LAYERS * 2 * KV_HEADS * positions * head_dim * 4
    assert result.kv_cache_kind  # the model's own cache class, named


def test_each_step_streams_under_its_phase(generated):
    _, streamed = generated
    phases = [s[0] for s in streamed]
    assert phases[:5] == ["warmup"] * 5  # the warm-up generation: its prefill and 4 decode steps
    assert [s[1:3] for s in streamed if s[0] == "prefill"] == [(0, 2), (1, 2)]
    decode = [s for s in streamed if s[0] == "decode"]
    assert [s[1] for s in decode] == list(range(8)) and {s[2] for s in decode} == {8}
    assert all(s[3] > 0 for s in streamed)


def test_the_result_is_json_and_pickles_without_torch_objects(generated):
    import pickle

    result, _ = generated
    data = json.loads(json.dumps(result.to_dict()))
    assert data["ttft_stats"]["n"] == 2 and data["decode_stats"]["n"] == 8 and data["tokens_per_s"] > 0
    assert data["input_shape"] == [2, 8] and data["kv_cache_bytes"] == result.kv_cache_bytes
    assert pickle.loads(pickle.dumps(result)).decode_ms == result.decode_ms


def test_the_greedy_loop_makes_the_tokens_model_generate_makes():
    from torchperf_tui.engine.workloads.models import build_model, input_spec_for

    model = build_model("hf:llama", model_args=TINY_LLAMA)
    prompt = input_spec_for("hf:llama", batch=2, seq_len=8, model_args=TINY_LLAMA).make(seed=1)
    with torch.inference_mode():
        loop = GreedyLoop(model, prompt, 6)
        loop.prefill()
        for step in range(1, 6):
            loop.decode(step)
        reference = model.generate(**prompt.kwargs, max_new_tokens=6, do_sample=False, pad_token_id=0)[:, 8:]
    ours = torch.cat(loop.generated, dim=1)
    assert ours.shape == (2, 6) and reference.shape[1] >= 2  # generate stops at an end-of-sequence token
    eos = model.generation_config.eos_token_id
    eos = set(eos if isinstance(eos, (list, tuple)) else [eos])
    for row, (mine, theirs) in enumerate(zip(ours.tolist(), reference.tolist())):
        # A row that made its end-of-sequence token is padded after it by generate (pad_token_id), which goes on
        # for the other rows; the greedy loop times every row to the end: the same tokens up to that one.
        end = next((i + 1 for i, token in enumerate(theirs) if token in eos), len(theirs))
        assert mine[:end] == theirs[:end], row
        assert all(token == 0 for token in theirs[end:]), row
    assert cache_bytes(loop.cache) == 2 * LAYERS * 2 * KV_HEADS * (8 + 6 - 1) * (HIDDEN // HEADS) * 4


def test_a_static_cache_with_a_compiled_decode_step_makes_the_same_tokens_and_is_read_whole():
    from torchperf_tui.engine.measurements.generation import cache_positions
    from torchperf_tui.engine.workloads.models import build_model, input_spec_for

    model = build_model("hf:llama", model_args=TINY_LLAMA).eval()
    prompt = input_spec_for("hf:llama", batch=2, seq_len=8, model_args=TINY_LLAMA).make(seed=1)
    loops = {kind: GreedyLoop(model, prompt, 6, kind) for kind in ("dynamic", "static")}
    with torch.inference_mode():
        for loop in loops.values():
            for _ in range(2):  # a second generation empties the static cache first
                loop.prefill()
                for step in range(1, 6):
                    loop.decode(step)
    tokens = {kind: torch.cat(loop.generated, dim=1).tolist() for kind, loop in loops.items()}
    assert tokens["static"] == tokens["dynamic"]
    static = loops["static"].cache
    assert type(static).__name__ == "StaticCache" and cache_positions(static) == 8 + 6 - 1
    # allocated for the prompt and every new token, and read whole by each step's attention
    assert cache_bytes(static) == 2 * LAYERS * 2 * KV_HEADS * (8 + 6) * (HIDDEN // HEADS) * 4


def test_a_cancel_keeps_only_whole_runs():
    calls = {"n": 0}

    def cancel() -> bool:
        calls["n"] += 1
        return calls["n"] > 12  # past the warm-up generation and into the second timed run

    result = run_generation(config(), 5, runs=3, should_cancel=cancel)
    assert result.cancelled and result.kv_cache_bytes is None
    assert len(result.decode_ms) == result.runs * 4 and result.runs == 1


def test_the_time_budget_stops_the_timed_runs_after_the_first():
    result = run_generation(config(time_budget_s=1e-9), 3, runs=4)
    assert result.budget_stopped and result.runs == 1 and not result.cancelled
    assert result.kv_cache_bytes is not None


@pytest.mark.parametrize("spec, args, words", [
    ("tests.tinymodels:tiny_cnn", (), "generation needs a causal language model"),
    ("resnet18", (), "this one is not a transformers model"),
    ("hf:bert", parse_model_args("num_hidden_layers=1,hidden_size=32,intermediate_size=64,num_attention_heads=2"),
     "has no causal-LM head (base)"),
])
def test_a_model_that_is_not_a_causal_lm_is_refused_in_one_line_before_it_is_built(spec, args, words, monkeypatch):
    import torchperf_tui.engine.workloads.workload as workload

    monkeypatch.setattr(workload, "prepare_workload", lambda *a, **k: pytest.fail("built"))
    with pytest.raises(ModelError) as caught:
        run_generation(config(model=spec, model_args=args, seq_len=None), 4)
    assert words in str(caught.value) and "\n" not in str(caught.value)


@pytest.mark.parametrize("new_tokens", [0, 1, -3, True, 2.5])
def test_fewer_than_two_new_tokens_are_refused(new_tokens):
    with pytest.raises(TorchperfError, match="give at least 2 new tokens"):
        run_generation(config(), new_tokens)


def test_a_prompt_and_new_tokens_past_the_maximum_positions_are_refused_with_the_count():
    args = TINY_LLAMA + (("max_position_embeddings", "16"),)
    with pytest.raises(ShapeError) as caught:
        run_generation(config(model_args=args, seq_len=10), 8)
    assert str(caught.value).startswith("a 10-token prompt and 8 new tokens need 17 positions, past the model's "
                                        "maximum of 16 (max_position_embeddings)")
    assert run_generation(config(model_args=args, seq_len=10), 7, runs=1).kv_cache_positions == 16  # exactly fits


@pytest.mark.parametrize("overrides, words", [
    (dict(step="train"), "leave out --step train"), (dict(compile="default"), "leave out --compile"),
    (dict(shapes="cycle:2"), "leave out --shapes"), (dict(amp="bf16", dtype="float32"), "instead of --amp"),
])
def test_options_that_do_not_apply_to_generation_are_refused(overrides, words):
    with pytest.raises(TorchperfError, match=words.replace("-", r"\-")):
        run_generation(config(**overrides), 3)


def test_a_generate_record_keeps_the_figures_and_reads_back():
    from torchperf_tui.engine.records.history_records import HistoryRecord
    from torchperf_tui.engine.records.result_records import records_of

    result = run_generation(config(), 3, runs=2)
    [record] = records_of(result, fingerprint={"torch": "x"})
    assert record.kind == "generate" and record.stats.n == 4 and record.samples_ms == result.decode_ms
    assert record.details["prompt_len"] == 8 and record.details["new_tokens"] == 3
    assert record.details["kv_cache_bytes"] == result.kv_cache_bytes
    again = HistoryRecord.from_dict(json.loads(json.dumps(record.to_dict())))
    line = history_line(again)
    assert "generation" in line and "3 new tokens after 8" in line and "TTFT" in line and "tokens/s" in line
    assert again.setup()["generate"] == 3
    # The run it was is kept whole, as a timing run's is, and read back as written; the result's JSON is as before.
    assert again.config == result.config.to_record() and again.config["device"] == "cpu"
    assert (again.config["model"], again.config["seed"]) == (config().model, config().seed)
    assert "config" not in result.to_dict()
    # a generation with another attention implementation (or quantization) is another set-up, in its record and its name
    eager = dataclasses.replace(result, config=dataclasses.replace(result.config, attn="eager"))
    [other] = records_of(eager, fingerprint={"torch": "x"})
    assert other.details["attn"] == "eager" and other.setup()["attn"] == "eager" and "attn" not in record.details
    assert setup_name(other) != setup_name(record) and "attn eager" in setup_name(other)


@pytest.mark.gpu
def test_on_cuda_each_step_is_timed_by_cuda_events_and_the_cache_lives_on_the_device():
    result = run_generation(config(device="cuda", batch=2), 5, runs=2)
    assert result.timer == "cuda-events" and result.device.startswith("cuda")
    assert len(result.decode_ms) == 8 and all(ms > 0 for ms in result.ttft_ms + result.decode_ms)
    assert result.kv_cache_bytes == 2 * LAYERS * 2 * KV_HEADS * (8 + 5 - 1) * (HIDDEN // HEADS) * 4
