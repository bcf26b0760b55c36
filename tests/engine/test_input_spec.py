"""The inputs of a run as an object: made in one place (InputSpec.make), at any batch."""

import torch

from torchperf_tui.engine.workloads.input_spec import InputSpec, ShapeFeed
from torchperf_tui.engine.workloads.inputs import make_input


def test_an_input_spec_knows_its_batch_and_the_shape_of_one_item():
    spec = InputSpec([8, 3, 32, 32])
    assert spec.shape == (8, 3, 32, 32) and spec.batch == 8
    assert spec.sample_shape == (3, 32, 32) and spec.rank == 4
    assert spec.at_batch(2) == InputSpec((2, 3, 32, 32)) and spec.batch == 8  # a copy; the spec is frozen


def test_made_inputs_are_the_seeded_tensor_in_the_dtype_and_layout_asked():
    spec = InputSpec((2, 3, 8, 8))
    x = spec.make("cpu", torch.bfloat16, channels_last=True, seed=3)
    assert torch.equal(x, make_input((2, 3, 8, 8), dtype=torch.bfloat16, channels_last=True, seed=3))
    assert x.dtype is torch.bfloat16 and x.is_contiguous(memory_format=torch.channels_last)
    assert torch.equal(spec.make(seed=3), spec.make(seed=3)) and not torch.equal(spec.make(seed=3), spec.make(seed=4))


def test_a_shape_feed_makes_each_new_shape_and_says_which_were_met_first():
    told = []
    x = InputSpec((2, 3, 8, 8)).make()
    feed = ShapeFeed(x, (2, 3, 8, 8), [(2, 3, 8, 8), (4, 3, 8, 8), (4, 3, 8, 8)], torch.float32,
                     torch.device("cpu"), False, 5, lambda i, shape, first: told.append((i, shape, first)))
    for i in range(3):
        feed.advance(i)
    assert feed.x.shape == (4, 3, 8, 8)
    assert torch.equal(feed.x, InputSpec((4, 3, 8, 8)).make(seed=5 + 1))  # made at the index it first came
    assert told == [(0, (2, 3, 8, 8), False), (1, (4, 3, 8, 8), True), (2, (4, 3, 8, 8), False)]


def test_the_meta_stand_in_has_the_shape_and_dtype_and_no_memory():
    x = InputSpec((64, 3, 224, 224)).make_meta(torch.float16)
    assert x.device.type == "meta" and x.shape == (64, 3, 224, 224) and x.dtype is torch.float16
