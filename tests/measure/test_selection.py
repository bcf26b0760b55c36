"""The frozen selection: what the sidebar (or the CLI's options) chose becomes the BenchConfig a job measures."""

from __future__ import annotations

import dataclasses

import pytest

from torchperf_tui.core.errors import ModelError, ShapeError
from torchperf_tui.engine.measurements.flags import Flags
from torchperf_tui.measure.selection import Selection


def test_a_typed_shape_and_batch_become_the_full_input():
    selection = Selection(model="resnet18", shape="3x64x64", batch="4", dtype="bfloat16", channels_last=True,
                          flags=Flags(mkldnn_enabled=False), shapes="cycle:4", compile="max-autotune",
                          warmup="auto", iters=7, seed=3)
    cfg = selection.config()
    assert (cfg.model, cfg.input_shape, cfg.batch, cfg.dtype, cfg.channels_last) == \
        ("resnet18", (4, 3, 64, 64), 4, "bfloat16", True)
    assert (cfg.warmup, cfg.iters, cfg.shapes, cfg.compile, cfg.seed) == ("auto", 7, "cycle:4", "max-autotune", 3)
    assert cfg.flags == Flags(mkldnn_enabled=False)
    other = Flags(deterministic_algorithms=True)
    assert selection.config(other).flags == other  # an arm of an A/B: the same selection, other flags


def test_no_shape_typed_means_the_models_default_at_the_batch_and_eager_means_no_compile():
    cfg = Selection(model="resnet18", batch="2").config()
    assert cfg.input_shape is None and cfg.batch == 2 and cfg.compile is None and cfg.flags == Flags()
    assert Selection(model="x", batch="2").analysis_params() == {"model": "x", "batch": 2, "input_shape": None,
                                                                "dtype": "float32", "step": "infer",
                                                                "model_args": (), "seq_len": None}
    assert Selection(model="x", step="train").analysis_params()["step"] == "train"  # the backward per layer too
    assert Selection(model="x", shape="3x8x8").analysis_params()["input_shape"] == (1, 3, 8, 8)


def test_the_selection_is_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        Selection(model="x").model = "y"


@pytest.mark.parametrize("shape, batch", [("3xa", "1"), ("3x8", "0"), ("3x8", "-2"), ("0x8", "1")])
def test_a_bad_shape_or_batch_is_the_engines_one_line_error(shape, batch):
    with pytest.raises(ShapeError):
        Selection(model="x", shape=shape, batch=batch).config()


def test_input_text_names_what_a_job_measures():
    assert Selection(model="x", shape="3x8x8", batch="2").input_text() == "2x3x8x8"
    assert Selection(model="x", batch="5").input_text((1, 3, 224, 224)) == "5x3x224x224"
    assert Selection(model="x").input_text() == "its default input, batch 1"
    assert "3xa" in Selection(model="x", shape="3xa").input_text()  # never raises: it labels a failure


def test_the_cli_builds_its_config_through_the_same_selection():
    from torchperf_tui.cli.args import build_parser
    from torchperf_tui.cli.common import bench_config as _bench_config

    args = build_parser().parse_args(["bench", "resnet18", "--input", "1x3x32x32", "--batch", "4",
                                      "--dtype", "bf16", "--channels-last", "--iters", "9"])
    cfg = _bench_config(args, iters=args.iters)
    assert cfg == Selection(model="resnet18", shape="3x32x32", batch="4", dtype="bfloat16", channels_last=True,
                            device=args.device, flags=cfg.flags, iters=9).config()


def test_the_models_overrides_and_sequence_length_reach_its_config_checked():
    cfg = Selection(model="hf:gpt2", model_args="n_layer=2, n_embd=64", seq_len="256").config()
    assert cfg.model_args == (("n_layer", "2"), ("n_embd", "64")) and cfg.seq_len == 256
    for bad in ("0", "-3", "many"):
        with pytest.raises(ShapeError, match="sequence length"):
            Selection(model="hf:gpt2", seq_len=bad).config()
    with pytest.raises(ModelError, match="KEY=VALUE"):
        Selection(model="hf:gpt2", model_args="n_layer").config()
