"""The inputs of a run as an object: made in one place (InputSpec.make), at any batch."""

import torch

from torchperf_tui.engine.workloads.input_spec import InputSpec, ShapeFeed, TensorSpec
from torchperf_tui.engine.workloads.model_inputs import ModelInputs
from torchperf_tui.engine.workloads.inputs import make_input


def test_an_input_spec_knows_its_batch_and_the_shape_of_one_item():
    spec = InputSpec([8, 3, 32, 32])
    assert spec.shape == (8, 3, 32, 32) and spec.batch == 8
    assert spec.sample_shape == (3, 32, 32) and spec.rank == 4
    assert spec.at_batch(2) == InputSpec((2, 3, 32, 32)) and spec.batch == 8  # a copy; the spec is frozen


def test_made_inputs_are_the_seeded_tensor_in_the_dtype_and_layout_asked():
    spec = InputSpec((2, 3, 8, 8))
    made = spec.make("cpu", torch.bfloat16, channels_last=True, seed=3)
    assert len(made.args) == 1 and not made.kwargs  # one positional tensor, as every torchvision model takes
    x = made.first
    assert torch.equal(x, make_input((2, 3, 8, 8), dtype=torch.bfloat16, channels_last=True, seed=3))
    assert x.dtype is torch.bfloat16 and x.is_contiguous(memory_format=torch.channels_last)
    assert torch.equal(spec.make(seed=3).first, spec.make(seed=3).first)
    assert not torch.equal(spec.make(seed=3).first, spec.make(seed=4).first)


def test_a_shape_feed_makes_each_new_shape_and_says_which_were_met_first():
    told = []
    x = InputSpec((2, 3, 8, 8)).make()
    feed = ShapeFeed(x, InputSpec((2, 3, 8, 8)), [(2, 3, 8, 8), (4, 3, 8, 8), (4, 3, 8, 8)], torch.float32,
                     torch.device("cpu"), False, 5, lambda i, shape, first: told.append((i, shape, first)))
    for i in range(3):
        feed.advance(i)
    assert feed.x.first.shape == (4, 3, 8, 8)
    assert torch.equal(feed.x.first, InputSpec((4, 3, 8, 8)).make(seed=5 + 1).first)  # made at the index it first came
    assert told == [(0, (2, 3, 8, 8), False), (1, (4, 3, 8, 8), True), (2, (4, 3, 8, 8), False)]


def test_the_meta_stand_in_has_the_shape_and_dtype_and_no_memory():
    x = InputSpec((64, 3, 224, 224)).make_meta(torch.float16).first
    assert x.device.type == "meta" and x.shape == (64, 3, 224, 224) and x.dtype is torch.float16


TOKENS = InputSpec((2, 16), main=TensorSpec("input_ids", "tokens", high=100),
                   extra=(TensorSpec("attention_mask", "mask"), TensorSpec("decoder_input_ids", "tokens", dims=(4,),
                                                                           high=100)))


def test_token_ids_are_int64_below_the_vocabulary_and_stay_int64_whatever_the_dtype():
    made = TOKENS.make("cpu", torch.bfloat16, seed=1)
    assert made.args == () and list(made.kwargs) == ["input_ids", "attention_mask", "decoder_input_ids"]
    ids = made.kwargs["input_ids"]
    assert ids.dtype is torch.int64 and ids.shape == (2, 16) and 0 <= int(ids.min()) and int(ids.max()) < 100
    assert made.kwargs["attention_mask"].dtype is torch.int64 and bool((made.kwargs["attention_mask"] == 1).all())
    assert made.kwargs["decoder_input_ids"].shape == (2, 4)  # fixed dims of its own, the batch followed
    assert torch.equal(TOKENS.make(seed=1).kwargs["input_ids"], ids)
    assert TOKENS.tokens and TOKENS.seq_len == 16 and not TOKENS.simple and InputSpec((1, 3)).simple


def test_a_new_shape_or_batch_moves_the_tensors_that_follow_the_main_one():
    longer = TOKENS.with_shape((3, 32)).make()
    assert longer.kwargs["input_ids"].shape == (3, 32) and longer.kwargs["attention_mask"].shape == (3, 32)
    assert longer.kwargs["decoder_input_ids"].shape == (3, 4)
    assert TOKENS.at_batch(5).shape == (5, 16)
    meta = TOKENS.make_meta(torch.float16)
    assert all(t.device.type == "meta" for t in meta.tensors()) and meta.kwargs["input_ids"].dtype is torch.int64


def test_the_call_passes_positional_then_keyword_tensors_and_the_inputs_say_what_they_are():
    seen = {}

    def model(*args, **kwargs):
        seen.update(args=args, kwargs=kwargs)
        return 1

    made = ModelInputs((torch.zeros(1, 2),), {"mask": torch.ones(1, 2, dtype=torch.int64)})
    assert made.call(model) == 1 and len(seen["args"]) == 1 and list(seen["kwargs"]) == ["mask"]
    assert made.describe() == "arg0 1x2 float32, mask 1x2 int64"
    assert TOKENS.describe().startswith("input_ids 2x16 int64 (ids < 100), attention_mask 2x16 int64 (all ones)")
    assert InputSpec((1, 3, 8, 8)).describe() == "1x3x8x8"
