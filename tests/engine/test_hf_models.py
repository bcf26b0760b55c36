"""hf: models: transformers configs with checked overrides, random-weight builds, and the inputs each model takes
(token ids with their mask, decoder ids, pixel values, audio features), all on tiny configs on the CPU."""

from __future__ import annotations

import sys

import pytest
import torch

pytest.importorskip("transformers")

from torchperf_tui.core.errors import ModelError, ShapeError
from torchperf_tui.engine.workloads import hf_models as hf
from torchperf_tui.engine.workloads.model_args import parse_model_args

VOCAB = 97
TINY = {
    "llama": f"num_hidden_layers=2,hidden_size=32,intermediate_size=64,num_attention_heads=4,vocab_size={VOCAB}",
    "gpt2": f"n_layer=2,n_embd=32,n_head=2,vocab_size={VOCAB},n_positions=64",
    "bert": f"num_hidden_layers=2,hidden_size=32,num_attention_heads=2,intermediate_size=64,vocab_size={VOCAB}",
    "t5": f"num_layers=2,d_model=32,d_ff=64,num_heads=2,d_kv=16,vocab_size={VOCAB}",
    "vit": "num_hidden_layers=2,hidden_size=32,num_attention_heads=2,intermediate_size=64,image_size=32,patch_size=8",
    "whisper": (f"encoder_layers=2,decoder_layers=2,d_model=32,encoder_attention_heads=2,decoder_attention_heads=2,"
                f"encoder_ffn_dim=64,decoder_ffn_dim=64,vocab_size={VOCAB},pad_token_id=0,num_mel_bins=16,"
                f"max_source_positions=32,max_target_positions=64"),
    "wav2vec2": "num_hidden_layers=2,hidden_size=32,num_attention_heads=2,intermediate_size=64,"
                "conv_dim=[16,16],conv_stride=[5,2],conv_kernel=[10,3],num_conv_pos_embeddings=16",
}


def tiny(model_type: str, extra: str = ""):
    return hf.load_config(model_type, parse_model_args(",".join(p for p in (TINY[model_type], extra) if p)))


def test_model_types_are_every_buildable_type_sorted():
    types = hf.model_types()
    assert types == sorted(types)
    assert {"llama", "gpt2", "bert", "t5", "bart", "vit", "whisper", "wav2vec2"} <= set(types)
    assert "sam_mask_decoder" not in types  # a part of SAM: no AutoModel builds it alone


@pytest.mark.parametrize("model_type, expected", [("llama", "causal-lm"), ("gpt2", "causal-lm"), ("bert", "base"),
                                                  ("t5", "base"), ("bart", "base"), ("vit", "base"),
                                                  ("whisper", "base"), ("wav2vec2", "base")])
def test_decoders_get_the_causal_lm_head_and_everything_else_the_base_model(model_type, expected):
    config = hf.load_config(model_type)
    assert hf.head(config) == expected
    assert hf.type_heads()[model_type] == expected


def test_overrides_reach_the_config_and_what_follows_from_them():
    config = tiny("llama")
    assert (config.num_hidden_layers, config.hidden_size, config.vocab_size) == (2, 32, VOCAB)
    assert config.head_dim == 8  # derived from the overridden width, not the default's 128
    gpt2 = tiny("gpt2", "num_hidden_layers=3")  # an alias of n_layer
    assert gpt2.n_layer == 3


@pytest.mark.parametrize("args, message", [
    ("num_hidden_layer=2", "hf:llama has no setting 'num_hidden_layer'; did you mean num_hidden_layers"),
    ("hidden_sise=64", "did you mean hidden_size"),
    ("num_hidden_layers=0", "num_hidden_layers=0: it must be at least 1"),
    ("num_hidden_layers=two", "not a whole number"),
    ("attention_dropout=2.0", "between 0 and 1"),
    ("rms_norm_eps=inf", "finite"),
    ("use_cache=perhaps", "true or false"),
    ("dtype=bfloat16", "dtype is not a model argument; use --dtype"),
    ("vocab_size=100", "pad_token_id|"),  # llama's default has no pad id: a small vocabulary is fine
])
def test_a_bad_override_is_one_line(args, message):
    if message.endswith("|"):
        hf.load_config("llama", parse_model_args(args))
        return
    with pytest.raises(ModelError) as info:
        hf.load_config("llama", parse_model_args(args))
    assert message in str(info.value) and "\n" not in str(info.value)


def test_a_padding_id_past_a_smaller_vocabulary_is_one_line():
    with pytest.raises(ModelError, match=r"hf:whisper: pad_token_id 50256 is not a token id of its vocabulary: it must "
                                         r"be between 0 and 96 \(vocab_size 97 - 1\); give pad_token_id=0 too"):
        hf.load_config("whisper", parse_model_args(f"vocab_size={VOCAB}"))


def test_an_unknown_type_names_the_closest_ones():
    with pytest.raises(ModelError, match=r"unknown transformers model type 'lama'; did you mean llama"):
        hf.load_config("hf:lama")
    with pytest.raises(ModelError, match="part of other models"):
        hf.load_config("sam_mask_decoder")


def test_without_transformers_the_line_says_how_to_install_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "transformers", None)
    with pytest.raises(ModelError, match="pip install transformers"):
        hf.load_config("llama")


def _check_tokens(t, high):
    assert t.dtype == torch.int64 and int(t.min()) >= 0 and int(t.max()) < high


@pytest.mark.parametrize("model_type", ["llama", "gpt2"])
def test_a_decoder_is_fed_token_ids_and_a_mask_and_returns_logits(model_type):
    config = tiny(model_type)
    spec = hf.input_spec(config, batch=2, seq_len=16)
    assert [t.name for t, _ in spec.shapes()] == ["input_ids", "attention_mask"]
    inputs = spec.make(seed=1)
    _check_tokens(inputs.kwargs["input_ids"], VOCAB)
    assert inputs.kwargs["attention_mask"].tolist() == [[1] * 16] * 2
    model = hf.build(config, torch.float32)
    assert not model.training
    with torch.no_grad():
        out = inputs.call(model)
    assert out.logits.shape == (2, 16, VOCAB) and torch.isfinite(out.logits).all()


def test_an_encoder_gets_the_base_model_and_its_hidden_states():
    config = tiny("bert")
    inputs = hf.input_spec(config, batch=2, seq_len=8).make()
    with torch.no_grad():
        out = inputs.call(hf.build(config, torch.float32))
    assert out.last_hidden_state.shape == (2, 8, 32)


def test_an_encoder_decoder_gets_decoder_ids_of_the_same_length():
    config = tiny("t5")
    spec = hf.input_spec(config, batch=2, seq_len=12)
    assert hf.max_positions(config) is None and hf.default_seq_len(config) == 128  # relative positions: no maximum
    inputs = spec.make()
    assert inputs.kwargs["decoder_input_ids"].shape == (2, 12)
    _check_tokens(inputs.kwargs["decoder_input_ids"], VOCAB)
    with torch.no_grad():
        out = inputs.call(hf.build(config, torch.float32))
    assert out.last_hidden_state.shape == (2, 12, 32) and out.encoder_last_hidden_state.shape == (2, 12, 32)


def test_a_vision_model_is_fed_pixel_values_of_its_image_size():
    config = tiny("vit")
    spec = hf.input_spec(config, batch=2, seq_len=None)
    assert spec.shape == (2, 3, 32, 32) and spec.main.name == "pixel_values" and not spec.tokens
    with torch.no_grad():
        out = spec.make().call(hf.build(config, torch.float32))
    assert out.last_hidden_state.shape == (2, 17, 32)  # 16 patches and the class token
    with pytest.raises(ShapeError, match=r"hf:vit takes pixel_values \(3x32x32\), not token ids"):
        hf.input_spec(config, batch=1, seq_len=64)


def test_whisper_is_fed_mel_features_and_decoder_ids_of_the_sequence_length():
    config = tiny("whisper")
    spec = hf.input_spec(config, batch=1, seq_len=10)
    shapes = {t.name: shape for t, shape in spec.shapes()}
    assert shapes == {"input_features": (1, 16, 64), "decoder_input_ids": (1, 10)}
    with torch.no_grad():
        out = spec.make().call(hf.build(config, torch.float32))
    assert out.last_hidden_state.shape == (1, 10, 32) and out.encoder_last_hidden_state.shape == (1, 32, 32)
    with pytest.raises(ShapeError, match=r"sequence length 65 is past the model's maximum positions "
                                         r"\(max_target_positions allows 64\)"):
        hf.input_spec(config, batch=1, seq_len=65)


def test_a_raw_audio_model_is_fed_one_second_of_samples():
    config = tiny("wav2vec2")
    spec = hf.input_spec(config, batch=1, seq_len=None)
    assert spec.shape == (1, 16000) and spec.main.name == "input_values"
    with torch.no_grad():
        out = spec.make().call(hf.build(config, torch.float32))
    assert out.last_hidden_state.shape[0] == 1 and out.last_hidden_state.shape[-1] == 32
    with pytest.raises(ShapeError, match="takes input_values"):
        hf.input_spec(config, batch=1, seq_len=8)


def test_bfloat16_builds_the_model_in_it_and_casts_float_inputs_never_token_ids():
    llama = tiny("llama")
    model = hf.build(llama, torch.bfloat16)
    assert {p.dtype for p in model.parameters()} == {torch.bfloat16}
    inputs = hf.input_spec(llama, batch=1, seq_len=8).make(dtype=torch.bfloat16)
    assert {t.dtype for t in inputs.tensors()} == {torch.int64}
    with torch.no_grad():
        assert inputs.call(model).logits.dtype == torch.bfloat16
    vit = tiny("vit")
    pixels = hf.input_spec(vit, batch=1, seq_len=None).make(dtype=torch.bfloat16)
    assert pixels.kwargs["pixel_values"].dtype == torch.bfloat16
    with torch.no_grad():
        assert pixels.call(hf.build(vit, torch.bfloat16)).last_hidden_state.dtype == torch.bfloat16


def test_sequence_lengths_default_to_128_or_the_maximum_and_past_it_name_the_key():
    gpt2 = tiny("gpt2")  # n_positions=64
    assert hf.position_limit(gpt2) == ("n_positions", 64)
    assert hf.default_seq_len(gpt2) == 64 and hf.default_seq_len(tiny("llama")) == 128
    assert hf.input_spec(gpt2, batch=3, seq_len=None).shape == (3, 64)
    with pytest.raises(ShapeError) as info:
        hf.input_spec(gpt2, batch=1, seq_len=100)
    assert str(info.value) == ("hf:gpt2: sequence length 100 is past the model's maximum positions (n_positions "
                               "allows 64); give --seq-len 64 or less, or --model-args n_positions=100")


def test_roberta_counts_the_positions_its_padding_offset_takes():
    config = hf.load_config("roberta", parse_model_args("max_position_embeddings=66"))
    assert hf.max_positions(config) == 64  # positions start after pad_token_id (1)


def test_a_typed_input_shape_replaces_the_main_input():
    spec = hf.input_spec(tiny("llama"), batch=4, seq_len=None, input_shape=(1, 24))
    assert [shape for _, shape in spec.shapes()] == [(4, 24), (4, 24)]
    assert hf.input_spec(tiny("vit"), batch=2, seq_len=None, input_shape=(1, 3, 48, 48)).shape == (2, 3, 48, 48)
    with pytest.raises(ShapeError, match="past the model's maximum"):
        hf.input_spec(tiny("gpt2"), batch=1, seq_len=None, input_shape=(1, 65))


def test_a_main_input_the_tool_cannot_make_is_named():
    with pytest.raises(ModelError, match=r"hf:patchtst's main input is 'past_values', which this tool cannot make"):
        hf.input_spec(hf.load_config("patchtst"), batch=1, seq_len=None)


def test_meta_builds_default_llama_without_memory_in_seconds():
    model = hf.build(hf.load_config("llama"), torch.float16, "meta")
    params = list(model.parameters())
    assert {p.device.type for p in params} == {"meta"} and {p.dtype for p in params} == {torch.float16}
    assert sum(p.numel() for p in params) == 6_738_415_616


def test_a_local_directory_is_read_offline_with_its_overrides(tmp_path):
    tiny("llama").save_pretrained(tmp_path)
    config = hf.load_config(f"hf:{tmp_path}", parse_model_args("num_hidden_layers=1"))
    assert config.num_hidden_layers == 1 and config.hidden_size == 32
    assert hf.label(config) == f"hf:{tmp_path}"
    gpt2_dir = tmp_path / "gpt2"
    tiny("gpt2").save_pretrained(gpt2_dir)
    assert hf.load_config(str(gpt2_dir), parse_model_args("num_hidden_layers=1")).n_layer == 1  # the stored name
    with pytest.raises(ModelError, match="no such directory"):
        hf.load_config(f"hf:{tmp_path}/nowhere")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ModelError, match="has no config.json"):
        hf.load_config(str(tmp_path / "empty"))
    with pytest.raises(ModelError, match="has no setting 'n_layers'"):
        hf.load_config(str(gpt2_dir), parse_model_args("n_layers=1"))


def test_the_sequence_length_sets_a_typed_shapes_length_and_bounds_a_schedule():
    spec = hf.input_spec(tiny("gpt2"), batch=2, seq_len=48, input_shape=(1, 24))  # the app's shape field: a default
    assert spec.shape == (2, 48) and spec.max_len == 64 and spec.max_len_key == "n_positions"
    with pytest.raises(ShapeError, match=r"past the model's maximum of 64 positions \(n_positions\)"):
        spec.check_shape((2, 96))
    t5 = hf.input_spec(tiny("t5"), batch=1, seq_len=16).with_shape((1, 32)).make()
    assert t5.kwargs["decoder_input_ids"].shape == (1, 32)  # the decoder's ids follow the input's length


def test_a_transformers_run_is_timed_trained_and_checked_for_determinism_end_to_end():
    from torchperf_tui.engine.measurements.bench_config import BenchConfig
    from torchperf_tui.engine.measurements.determinism import determinism_of
    from torchperf_tui.engine.measurements.timing import run_benchmark
    from torchperf_tui.engine.workloads.loss import LOSS_NEXT_TOKEN

    cfg = BenchConfig(model="hf:gpt2", model_args=parse_model_args(TINY["gpt2"]), seq_len=16, device="cpu",
                      warmup=1, iters=3)
    result = run_benchmark(cfg)
    assert len(result.samples_ms) == 3 and result.seq_len == 16 and result.model_args == TINY["gpt2"]
    assert result.inputs.startswith("input_ids 1x16 int64")
    trained = run_benchmark(BenchConfig(**{**cfg.__dict__, "step": "train"}))
    assert trained.loss == LOSS_NEXT_TOKEN and trained.stats is not None
    report = determinism_of(cfg)  # its KV cache is compared by its tensors, not as an object
    assert report.summary().startswith("deterministic"), report.summary()
