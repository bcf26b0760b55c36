import pytest
import torch

from torchperf_tui.core.errors import DeviceError, ShapeError
from torchperf_tui.engine.workloads.inputs import dtype_name, format_shape, make_input, parse_dtype, parse_shape
from torchperf_tui.engine.hardware.device_choice import resolve_device


@pytest.mark.parametrize("text, shape", [
    ("1x3x224x224", (1, 3, 224, 224)),
    ("8,3,32,32", (8, 3, 32, 32)),
    (" 2 3 16 112 112 ", (2, 3, 16, 112, 112)),
    ("4X10", (4, 10)),
])
def test_parse_shape_accepts_common_spellings(text, shape):
    assert parse_shape(text) == shape
    assert parse_shape(format_shape(shape)) == shape


@pytest.mark.parametrize("text", ["", "1x3xfoo", "1x0x4", "1x-3x4", "7"])
def test_parse_shape_rejects_with_one_line(text):
    with pytest.raises(ShapeError) as info:
        parse_shape(text)
    assert "\n" not in str(info.value)


def test_dtypes_round_trip_and_aliases():
    assert parse_dtype("fp16") is torch.float16
    assert parse_dtype("bf16") is torch.bfloat16
    assert dtype_name(parse_dtype("float32")) == "float32"
    with pytest.raises(ShapeError, match="unknown dtype"):
        parse_dtype("int3")


def test_cuda_on_a_cpu_box_is_a_device_error(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert resolve_device("auto").type == "cpu"
    with pytest.raises(DeviceError, match="no CUDA device"):
        resolve_device("cuda")
    with pytest.raises(DeviceError, match="unknown device"):
        resolve_device("tpu")


def test_make_input_is_deterministic_and_honours_channels_last():
    a = make_input((2, 3, 8, 8), seed=1)
    b = make_input((2, 3, 8, 8), seed=1)
    assert torch.equal(a, b)
    cl = make_input((2, 3, 8, 8), channels_last=True)
    assert cl.is_contiguous(memory_format=torch.channels_last)
    assert make_input((1, 3, 4, 4), dtype=torch.bfloat16).dtype is torch.bfloat16
