"""The model registry: catalogue by task, default shapes, name resolution, user factories."""

from __future__ import annotations

import sys
import textwrap

import pytest
import torch
from torch import nn

from torchperf_tui.core.errors import ModelError
from torchperf_tui.engine.workloads.model_catalogue import TASKS, list_catalogue, reference_weights
from torchperf_tui.engine.workloads.models import (
    DetectionAdapter, OpticalFlowAdapter, build_model, default_input_shape, resolve_model,
)


def test_catalogue_groups_every_torchvision_task():
    tasks = {entry.task for entry in list_catalogue()}
    assert tasks == set(TASKS) - {"custom"}
    assert {e.name for e in list_catalogue("video")} >= {"r3d_18", "s3d", "mvit_v2_s", "swin3d_t"}
    assert {e.name for e in list_catalogue("detection")} >= {"fasterrcnn_resnet50_fpn", "ssd300_vgg16"}
    assert "resnet50" in {e.name for e in list_catalogue("classification")}
    assert "quantized_resnet50" not in {e.name for e in list_catalogue("classification")}


def test_catalogue_filter_rejects_unknown_task():
    with pytest.raises(ModelError, match="unknown task"):
        list_catalogue("speech")


def test_default_shapes_follow_each_model():
    assert resolve_model("resnet50").input_shape == (3, 224, 224)
    assert resolve_model("inception_v3").input_shape == (3, 299, 299)
    assert resolve_model("efficientnet_b7").input_shape == (3, 600, 600)
    # weights=None builds the 224 ViT-H, not the 518 SWAG one, so its default must be 224.
    assert resolve_model("vit_h_14").input_shape == (3, 224, 224)
    assert resolve_model("r3d_18").input_shape == (3, 16, 112, 112)
    assert resolve_model("s3d").input_shape == (3, 16, 224, 224)
    assert resolve_model("raft_small").input_shape == (2, 3, 520, 960)
    assert default_input_shape("resnet18", batch=8) == (8, 3, 224, 224)


def test_quantized_models_are_listed_unsupported_with_a_reason():
    entries = list_catalogue("quantization")
    assert entries and all(not e.supported and e.reason for e in entries)
    with pytest.raises(ModelError, match="not supported"):
        build_model("quantized_resnet18")


def test_unknown_name_suggests_close_matches():
    with pytest.raises(ModelError) as info:
        resolve_model("resnt18")
    message = str(info.value)
    assert message.startswith("unknown model 'resnt18'; did you mean")
    assert "resnet18" in message and "\n" not in message


def test_unknown_name_without_close_match_says_how_to_give_one():
    with pytest.raises(ModelError, match="package.module:factory"):
        resolve_model("zzzzqqq")


def test_names_are_case_insensitive():
    assert resolve_model("ResNet18").name == "resnet18"


def test_build_is_eval_mode_with_random_weights_and_right_output():
    model = build_model("resnet18")
    assert not model.training
    assert next(model.parameters()).device.type == "cpu"
    with torch.no_grad():
        assert model(torch.randn(1, 3, 64, 64)).shape == (1, 1000)


def test_meta_build_allocates_no_weights_even_for_regnets():
    # RegNet builders compute widths with tensor maths, which `with torch.device("meta")` breaks.
    model = build_model("regnet_y_400mf", device="meta")
    assert {p.device.type for p in model.parameters()} == {"meta"}
    assert {b.device.type for b in model.buffers()} == {"meta"}
    assert not model.training


def test_meta_build_leaves_later_builds_real():
    build_model("resnet18", device="meta")
    assert next(build_model("resnet18").parameters()).device.type == "cpu"


class RecordingModel(nn.Module):
    """Stands in for a detector / RAFT: records what its forward was given."""

    def forward(self, *args):
        self.seen = args
        return args


def test_detection_adapter_unbinds_the_batch_into_a_list():
    inner = RecordingModel()
    DetectionAdapter(inner)(torch.zeros(2, 3, 8, 8))
    (images,) = inner.seen
    assert isinstance(images, list) and [tuple(i.shape) for i in images] == [(3, 8, 8)] * 2


def test_optical_flow_adapter_passes_two_frames():
    inner = RecordingModel()
    pairs = torch.arange(2 * 2 * 3 * 4 * 4, dtype=torch.float32).reshape(2, 2, 3, 4, 4)
    OpticalFlowAdapter(inner)(pairs)
    first, second = inner.seen
    assert torch.equal(first, pairs[:, 0]) and torch.equal(second, pairs[:, 1])
    with pytest.raises(ValueError, match="frame pairs"):
        OpticalFlowAdapter(inner)(torch.zeros(2, 3, 4, 4))


def test_detectors_and_raft_are_built_behind_their_adapters():
    assert isinstance(build_model("ssdlite320_mobilenet_v3_large", "meta"), DetectionAdapter)
    assert isinstance(build_model("raft_small", "meta"), OpticalFlowAdapter)


def test_no_builder_is_asked_for_pretrained_weights(monkeypatch):
    import torchvision.models as tvm

    calls = {}
    real = tvm.get_model_builder

    def spy(name):
        builder = real(name)

        def wrapped(**kwargs):
            calls[name] = kwargs
            return builder(**kwargs)
        wrapped.__signature__ = __import__("inspect").signature(builder)
        return wrapped

    monkeypatch.setattr(tvm, "get_model_builder", spy)
    build_model("fcos_resnet50_fpn", "meta")
    assert calls["fcos_resnet50_fpn"]["weights"] is None
    assert calls["fcos_resnet50_fpn"]["weights_backbone"] is None


def test_reference_weights_cover_every_classification_weights_entry():
    import torchvision.models as tvm

    refs = reference_weights("classification")
    expected = sum(len(tvm.get_model_weights(e.name)) for e in list_catalogue("classification"))
    assert len(refs) == expected
    swag = next(r for r in refs if (r.model, r.weights) == ("vit_h_14", "IMAGENET1K_SWAG_E2E_V1"))
    assert swag.input_shape == (3, 518, 518) and swag.builder_kwargs == {"image_size": 518}


@pytest.fixture
def user_module(tmp_path, monkeypatch):
    """A user's model file in a directory that is importable, as the current directory would be."""
    (tmp_path / "my_models.py").write_text(textwrap.dedent("""
        import torch.nn as nn

        def tiny():
            return nn.Sequential(nn.Conv2d(3, 4, 3), nn.ReLU(), nn.Flatten(), nn.Linear(4 * 222 * 222, 2))

        def small_vector():
            return nn.Linear(8, 2)
        small_vector.input_shape = (8,)

        def broken():
            raise ValueError("no GPU here")

        def not_a_module():
            return 42

        class ClassShaped(nn.Module):  # a module:Class spec, its shape on the class
            input_shape = (3, 64, 64)

            def __init__(self):
                super().__init__()
                self.conv = nn.Conv2d(3, 4, 3)

            def forward(self, x):
                return self.conv(x)

        class InstanceShaped(ClassShaped):  # the shape set in __init__, as many models do
            input_shape = None

            def __init__(self):
                super().__init__()
                self.input_shape = (3, 48, 40)

        def factory_of_shaped():  # a factory whose module carries the shape
            return InstanceShaped()
    """))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.chdir(tmp_path)
    yield "my_models"
    sys.modules.pop("my_models", None)


def test_custom_factory_builds_in_eval_mode(user_module):
    entry = resolve_model(f"{user_module}:tiny")
    assert entry.task == "custom" and entry.supported and entry.input_shape == (3, 224, 224)
    model = build_model(f"{user_module}:tiny")
    assert isinstance(model, nn.Sequential) and not model.training


def test_custom_factory_input_shape_attribute(user_module):
    assert default_input_shape(f"{user_module}:small_vector", batch=4) == (4, 8)


def test_a_model_class_and_the_model_it_builds_say_their_input_shape(user_module):
    from torchperf_tui.engine.workloads.models import input_shape_note

    assert default_input_shape(f"{user_module}:ClassShaped", batch=2) == (2, 3, 64, 64)
    assert resolve_model(f"{user_module}:InstanceShaped").input_shape == (3, 48, 40)  # once 3x224x224, no word
    assert default_input_shape(f"{user_module}:factory_of_shaped") == (1, 3, 48, 40)
    assert input_shape_note(f"{user_module}:ClassShaped") is None
    assert input_shape_note(f"{user_module}:InstanceShaped") is None and input_shape_note("resnet18") is None
    note = input_shape_note(f"{user_module}:tiny")  # declares nothing: the assumed default is said
    assert note.startswith(f"{user_module}:tiny does not say its input shape") and "assumed 3x224x224" in note
    assert resolve_model(f"{user_module}:broken").input_shape == (3, 224, 224)  # the build says what is wrong


def test_custom_module_imports_from_the_current_directory(tmp_path, monkeypatch):
    (tmp_path / "cwd_model.py").write_text("import torch.nn as nn\ndef make():\n    return nn.ReLU()\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", str(tmp_path))])
    try:
        assert isinstance(build_model("cwd_model:make"), nn.ReLU)
    finally:
        sys.modules.pop("cwd_model", None)
    assert str(tmp_path) not in sys.path


def test_custom_import_error_is_one_line():
    with pytest.raises(ModelError) as info:
        resolve_model("no_such_pkg_xyz.bar:make")
    assert str(info.value) == "cannot import 'no_such_pkg_xyz.bar': No module named 'no_such_pkg_xyz'"


def test_custom_missing_factory(user_module):
    with pytest.raises(ModelError, match="has no attribute 'nope'"):
        resolve_model(f"{user_module}:nope")


def test_custom_factory_exception_is_a_model_error(user_module):
    with pytest.raises(ModelError) as info:
        build_model(f"{user_module}:broken")
    assert str(info.value) == "'my_models:broken' raised ValueError: no GPU here"


def test_custom_factory_must_return_a_module(user_module):
    with pytest.raises(ModelError, match="returned int, not a torch.nn.Module"):
        build_model(f"{user_module}:not_a_module")


@pytest.mark.parametrize("spec", ["", ":make", "pkg:"])
def test_malformed_specs(spec):
    with pytest.raises(ModelError):
        resolve_model(spec)
