"""hf: configs a user (or a hostile folder) gives that transformers cannot use: each is one whole line that says what
is wrong, and nothing is prompted, read without end or waited on. A directory's config.json is read only if it is a
regular file of a config's size; a folder whose config asks for its own code (auto_map) is refused in our words."""

from __future__ import annotations

import builtins
import json
import os
import threading

import pytest
import torch

pytest.importorskip("transformers")

from torchperf_tui.core.errors import ModelError, ModelTooLarge
from torchperf_tui.engine.workloads import hf_config
from torchperf_tui.engine.workloads import hf_models as hf
from torchperf_tui.engine.workloads.model_args import parse_model_args
from torchperf_tui.engine.workloads.model_fit import check_fits

GiB = 1024 ** 3
TINY_LLAMA = {"model_type": "llama", "num_hidden_layers": 1, "hidden_size": 32, "intermediate_size": 64,
              "num_attention_heads": 2, "num_key_value_heads": 2, "vocab_size": 97}


@pytest.fixture
def no_prompt(monkeypatch):
    """transformers asks on the terminal before it runs a folder's own code: here that is a failure."""
    def refuse(*args, **kwargs):
        raise AssertionError(f"something prompted: {args[0] if args else ''}")

    monkeypatch.setattr(builtins, "input", refuse)


def folder_with(tmp_path, values=None, *, text=None, name="model"):
    folder = tmp_path / name
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(values) if text is None else text)
    return folder


def refusal_of(folder) -> str:
    with pytest.raises(ModelError) as info:
        hf.load_config(f"hf:{folder}")
    line = str(info.value)
    assert "\n" not in line and line.startswith(f"hf:{folder}: ")
    return line[len(f"hf:{folder}: "):]


# -- a folder's own code (auto_map) ---------------------------------------------------------------------------

def test_a_config_that_needs_its_folders_own_code_is_refused_in_our_words_without_a_prompt(tmp_path, no_prompt):
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "configuration_x.py").write_text("raise SystemExit('the folder code ran')\n")
    folder = tmp_path / "model"
    (folder / "config.json").write_text(json.dumps({
        **TINY_LLAMA, "model_type": "xcustom",
        "auto_map": {"AutoConfig": "configuration_x.XConfig", "AutoModelForCausalLM": "modeling_x.XModel"}}))
    assert refusal_of(folder) == ("its config.json asks for the folder's own code (auto_map) for model type "
                                  "'xcustom', which transformers does not know; this tool never runs a model's code "
                                  "from its folder: give the model as package.module:factory")


def test_an_auto_map_beside_a_type_transformers_knows_builds_transformers_class_without_a_prompt(tmp_path,
                                                                                                no_prompt):
    folder = folder_with(tmp_path, {**TINY_LLAMA, "auto_map": {"AutoConfig": "configuration_x.XConfig",
                                                                 "AutoModelForCausalLM": "modeling_x.XModel"}})
    model = hf.build(hf.load_config(f"hf:{folder}"), torch.float32, "meta")
    assert type(model).__name__ == "LlamaForCausalLM"


# -- config.json that is not a config -------------------------------------------------------------------------

def _fifo(folder):
    os.mkfifo(folder / "config.json")


def _link_to_dev_zero(folder):
    (folder / "config.json").symlink_to("/dev/zero")


def _directory(folder):
    (folder / "config.json").mkdir()


def _dangling_link(folder):
    (folder / "config.json").symlink_to(folder / "nowhere.json")


def _huge(folder):
    with open(folder / "config.json", "wb") as fh:  # sparse: a size past the bound without the disk it names
        fh.truncate(hf_config.MAX_CONFIG_BYTES + 1)


def _text(text):
    def write(folder):
        (folder / "config.json").write_text(text)
    return write


@pytest.mark.parametrize("make, said", [
    (_fifo, "its config.json is a FIFO (named pipe), not a regular file"),
    (_link_to_dev_zero, "its config.json is a character device (a link to /dev/zero), not a regular file"),
    (_directory, "its config.json is a directory, not a regular file"),
    (_dangling_link, "its config.json is a link to {folder}/nowhere.json, which does not exist"),
    (_huge, f"its config.json is {hf_config.MAX_CONFIG_BYTES + 1:,} bytes, too large for a config (at most 16 MiB)"),
    (_text(""), "its config.json is empty"),
    (_text("garbage{"), "its config.json is not valid JSON: Expecting value at line 1 column 1"),
    (_text("[1, 2]"), "its config.json holds a JSON list, not the object of settings a config is"),
    (_text('{"model_type": "llama", "rms_norm_eps": NaN}'), "its config.json holds NaN, not a finite number"),
    (_text('{"hidden_size": 32}'), "its config.json names no model_type (transformers' type of the model, e.g. "
                                   "\"llama\")"),
    (_text('{"model_type": "lama"}'), "transformers does not know its model type 'lama'; did you mean llama"),
], ids=["fifo", "link-to-dev-zero", "directory", "dangling-link", "huge", "empty", "garbage", "list", "nan",
        "no-type", "unknown-type"])
def test_a_config_json_that_is_no_config_is_one_line_saying_what_it_is(tmp_path, make, said):
    folder = tmp_path / "model"
    folder.mkdir()
    make(folder)
    unblock = None
    if make is _fifo:
        # Were the FIFO opened to be read, it would wait for a writer: one comes after a while, so a regression
        # fails on the line it gives instead of hanging the suite.
        def write_garbage() -> None:
            with open(folder / "config.json", "w") as fh:
                fh.write("not what a config is")

        unblock = threading.Timer(20, write_garbage)
        unblock.daemon = True
        unblock.start()
    try:
        assert refusal_of(folder).startswith(said.format(folder=folder))
    finally:
        if unblock is not None:
            unblock.cancel()


# -- settings transformers refuses: the whole reason ----------------------------------------------------------

def test_a_setting_a_validator_refuses_says_the_validators_reason_whole():
    with pytest.raises(ModelError) as info:
        hf.load_config("llama", parse_model_args("num_hidden_layers=1,hidden_size=100,num_attention_heads=3"))
    assert str(info.value) == ("hf:llama: the config refuses these settings: The hidden size (100) is not a multiple "
                               "of the number of attention heads (3).")


def test_a_config_json_a_validator_refuses_says_the_validators_reason_whole(tmp_path):
    folder = folder_with(tmp_path, {**TINY_LLAMA, "hidden_size": 100, "num_attention_heads": 3})
    assert refusal_of(folder) == ("transformers refuses its config.json: The hidden size (100) is not a multiple of "
                                  "the number of attention heads (3).")


def test_refusal_keeps_a_one_line_message_and_joins_a_header_without_a_cause():
    assert hf_config.refusal(ValueError("plain reason\nmore")) == "plain reason"
    assert hf_config.refusal(ValueError("Validation error for field 'x':\n    TypeError: not an int")) == \
        "Validation error for field 'x': TypeError: not an int"


# -- ids and sizes: say what is wrong and what to change ------------------------------------------------------

def test_a_negative_padding_id_says_the_range_it_must_be_in():
    with pytest.raises(ModelError) as info:
        hf.load_config("llama", parse_model_args("num_hidden_layers=1,pad_token_id=-5"))
    assert str(info.value) == ("hf:llama: pad_token_id -5 is not a token id of its vocabulary: it must be between 0 "
                               "and 31999 (vocab_size 32000 - 1); give pad_token_id=0")


def test_a_vocabulary_too_large_to_fit_is_named_with_the_vocabulary_that_fits_not_fewer_layers():
    args = parse_model_args("num_hidden_layers=1,hidden_size=64,intermediate_size=64,num_attention_heads=2,"
                            "vocab_size=100000000")
    with pytest.raises(ModelTooLarge) as info:
        check_fits("hf:llama", args, torch.float32, "cpu", free_bytes=lambda device: 2 * GiB)
    line = str(info.value)
    assert "of it the embeddings of its 100,000,000-token vocabulary" in line
    assert "give --model-args vocab_size=" in line and "fewer layers" not in line
    fits = int(line.split("vocab_size=")[1].split()[0])
    check_fits("hf:llama", parse_model_args(f"num_hidden_layers=1,hidden_size=64,intermediate_size=64,"
                                            f"num_attention_heads=2,vocab_size={fits}"),
               torch.float32, "cpu", free_bytes=lambda device: 2 * GiB)  # the size it gives fits
