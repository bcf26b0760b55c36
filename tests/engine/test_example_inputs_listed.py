"""A factory's example_inputs are listed as they are made (engine/workloads/example_inputs.py's
describe_example_inputs): each tensor's name (a keyword's, or the forward parameter a positional one goes to),
shape and dtype, in the run's dtype, made on the meta device or, where the user's code cannot, on the CPU; and no
input shape is said to be assumed for such a factory."""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from torchperf_tui.engine.measurements.bench_config import BenchConfig
from torchperf_tui.engine.measurements.timing import run_benchmark
from torchperf_tui.engine.workloads.example_inputs import describe_example_inputs
from torchperf_tui.engine.workloads.models import input_shape_note

HERE = "tests.engine.test_example_inputs_listed"
TWO = "tests.tinymodels:two_inputs"
KEYWORDS = "tests.tinymodels:keyword_inputs"


class Scaled(nn.Module):
    """A class factory: its forward names its positional inputs."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 2)

    def forward(self, features: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
        return self.fc(features) * scale

    @staticmethod
    def example_inputs(batch, device, dtype):
        return torch.randn(batch, 4, device=device, dtype=dtype), torch.ones(batch, 1, device=device, dtype=dtype)


def from_numpy() -> nn.Module:
    return nn.Linear(3, 2)


def _numpy_examples(batch, device, dtype):  # cannot be made on the meta device: its values are read
    values = torch.zeros(batch, 3, device=device, dtype=dtype)
    return torch.from_numpy(values.numpy() + np.float32(values.sum().item())).to(device=device, dtype=dtype)


from_numpy.example_inputs = _numpy_examples


def test_keyword_inputs_are_listed_by_their_names_in_their_own_dtypes():
    assert describe_example_inputs(KEYWORDS, 3, torch.float32) == \
        "example_inputs at batch 3: input_ids 3x12 int64, attention_mask 3x12 int64"


def test_positional_inputs_are_named_by_the_forward_they_go_to_where_it_can_be_read():
    assert describe_example_inputs(f"{HERE}:Scaled", 2, torch.bfloat16) == \
        "example_inputs at batch 2: features 2x4 bfloat16, scale 2x1 bfloat16"
    # a function factory's model is not built for the words: its inputs' places, unless the built model is given
    assert describe_example_inputs(TWO, 1, torch.float32) == "example_inputs at batch 1: arg0 1x3x8x8 float32, arg1 1x5 float32"
    from tests.tinymodels import TwoInputs

    assert describe_example_inputs(TWO, 1, torch.float32, model=TwoInputs()).endswith("image 1x3x8x8 float32, "
                                                                                      "extra 1x5 float32")


def test_inputs_the_meta_device_cannot_make_are_made_on_the_cpu():
    assert describe_example_inputs(f"{HERE}:from_numpy", 4, torch.float32) == "example_inputs at batch 4: arg0 4x3 float32"


def test_a_run_lists_its_inputs_and_no_shape_is_assumed():
    result = run_benchmark(BenchConfig(model=KEYWORDS, batch=2, device="cpu", warmup=0, iters=2))
    assert result.example_inputs and result.inputs == ("example_inputs at batch 2: input_ids 2x12 int64, "
                                                       "attention_mask 2x12 int64")
    assert input_shape_note(KEYWORDS) is None and input_shape_note(f"{HERE}:Scaled") is None
    assert "assumed 3x224x224" in input_shape_note("tests.tinymodels:tiny_cnn")
