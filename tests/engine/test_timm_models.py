"""timm: models: every name of timm.list_models(), built with pretrained=False, its input size from timm's registry
(no download), and --model-args checked against the model class's keyword arguments."""

from __future__ import annotations

import sys

import pytest
import torch

pytest.importorskip("timm")

from tests.one_line import one_line_error
from torchperf_tui.core.errors import ModelError
from torchperf_tui.engine.workloads import timm_models
from torchperf_tui.engine.workloads.model_args import parse_model_args

SMALL_VIT = parse_model_args("embed_dim=32,depth=2,num_heads=2,img_size=32,patch_size=8,num_classes=10")


def test_every_timm_name_is_listed():
    names = timm_models.model_names()
    assert len(names) > 1000 and {"resnet18", "convnext_atto", "vit_tiny_patch16_224"} <= set(names)


def test_input_sizes_come_from_the_pretrained_config_without_a_download():
    assert timm_models.input_size("resnet18") == (3, 224, 224)
    assert timm_models.input_size("timm:inception_v3") == (3, 299, 299)
    assert timm_models.input_size("vit_base_patch16_384") == (3, 384, 384)
    assert timm_models.input_shape("vit_tiny_patch16_224", SMALL_VIT) == (3, 32, 32)  # img_size overrides it


@pytest.mark.parametrize("name, args, shape, classes", [
    ("resnet18", "num_classes=10", (2, 3, 64, 64), 10),
    ("convnext_atto", "", (2, 3, 64, 64), 1000),
    ("vit_tiny_patch16_224", SMALL_VIT, (2, 3, 32, 32), 10),
])
def test_a_model_builds_with_random_weights_and_runs_a_forward(name, args, shape, classes):
    model_args = parse_model_args(args) if isinstance(args, str) else args
    model = timm_models.build(name, model_args)
    assert not model.training
    with torch.no_grad():
        out = model(torch.randn(shape))
    assert out.shape == (shape[0], classes) and torch.isfinite(out).all()


def test_meta_builds_the_structure_without_memory():
    model = timm_models.build("timm:resnet18", device="meta")
    assert {p.device.type for p in model.parameters()} == {"meta"}
    assert sum(p.numel() for p in model.parameters()) == 11_689_512


@pytest.mark.parametrize("args, message", [
    ("num_class=10", "timm:resnet18 has no keyword argument 'num_class'; did you mean num_classes"),
    ("num_classes=ten", "not a whole number"),
    ("drop_rate=1.5", "between 0 and 1"),
    ("dtype=float16", "has no keyword argument 'dtype'"),
])
def test_a_bad_override_is_one_line(args, message):
    assert message in one_line_error(ModelError, lambda: timm_models.build("resnet18", parse_model_args(args),
                                                                             device="meta"))


def test_an_unknown_name_names_the_closest_ones():
    with pytest.raises(ModelError, match=r"unknown timm model 'resnt18'; did you mean resnet18"):
        timm_models.build("timm:resnt18")


def test_without_timm_the_line_says_how_to_install_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "timm", None)
    timm_models._names.cache_clear()
    try:
        with pytest.raises(ModelError, match="pip install timm"):
            timm_models.model_names()
    finally:
        timm_models._names.cache_clear()
