"""--model-args as typed: KEY=VALUE pairs, each value parsed and range-checked against its setting's default."""

import math

import pytest

from torchperf_tui.core.errors import ModelError
from torchperf_tui.engine.workloads.model_args import check_keys, coerce, format_model_args, parse_model_args


def test_pairs_are_parsed_in_order_and_brackets_keep_their_commas():
    assert parse_model_args("") == () and parse_model_args(None) == ()
    args = parse_model_args(" num_hidden_layers=2, depths=[2,2], name='a,b' ")
    assert args == (("num_hidden_layers", "2"), ("depths", "[2,2]"), ("name", "'a,b'"))
    assert format_model_args(args) == "num_hidden_layers=2,depths=[2,2],name='a,b'"


@pytest.mark.parametrize("text, message", [("layers", "KEY=VALUE"), ("=2", "KEY=VALUE"), ("a=", "KEY=VALUE"),
                                           ("a=1,,b=2", "empty item"), ("a=1,a=2", "twice"),
                                           ("2x=1", "not a setting")])
def test_malformed_overrides_are_one_line(text, message):
    with pytest.raises(ModelError, match=message):
        parse_model_args(text)


def test_an_unknown_key_names_the_closest_ones():
    with pytest.raises(ModelError, match="hf:gpt2 has no setting 'n_layers'; did you mean n_layer"):
        check_keys("hf:gpt2", (("n_layers", "2"),), ["n_layer", "n_embd", "n_head"])
    check_keys("hf:gpt2", (("n_layer", "2"),), ["n_layer"])


def test_values_take_the_type_of_the_default_and_are_range_checked():
    assert coerce("m", "n_layer", "2", 12) == 2 and coerce("m", "use_cache", "off", True) is False
    assert coerce("m", "eps", "1e-6", 1e-5) == 1e-6 and coerce("m", "act", "'gelu'", "relu") == "gelu"
    assert coerce("m", "rope_scaling", "None", None) is None and coerce("m", "sizes", "[1, 2]", None) == [1, 2]
    for key, text, default, message in [("n_layer", "two", 12, "whole number"), ("n_layer", "0", 12, "at least 1"),
                                        ("pad", "-1", 0, "at least 0"), ("eps", "nan", 1e-5, "finite"),
                                        ("attn_dropout", "1.5", 0.1, "between 0 and 1"),
                                        ("use_cache", "maybe", True, "true or false")]:
        with pytest.raises(ModelError, match=message):
            coerce("m", key, text, default)
    with pytest.raises(ModelError, match="finite"):
        coerce("m", "scale", "1e999", None)
    assert not math.isnan(coerce("m", "x", "1.0", None))


def test_an_index_setting_may_be_zero_whatever_its_default():
    assert coerce("hf:whisper", "pad_token_id", "0", 50257) == 0
    assert coerce("m", "decoder_start_token_id", "0", 50258) == 0
    with pytest.raises(ModelError, match="at least 0"):
        coerce("hf:whisper", "pad_token_id", "-1", 50257)
    with pytest.raises(ModelError, match="at least 1"):
        coerce("m", "num_layers", "0", 6)


def test_every_drop_rate_is_a_probability():
    for key in ("drop_rate", "drop_path_rate", "attn_drop_rate", "layerdrop", "hidden_dropout_prob"):
        with pytest.raises(ModelError, match="between 0 and 1"):
            coerce("timm:resnet18", key, "1.5", 0.0)
    assert coerce("timm:resnet18", "drop_path_rate", "0.1", 0.0) == 0.1
