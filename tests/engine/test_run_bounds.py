"""The bounds of a run (issue 32's hostile findings 2, 6 and 10), in the engine: the shape schedule drawn as the
iterations go (no list of `iters` shapes), the time budget over the warm-up too, generation's budget over its
warm-up and not starting a generation that would not fit, a meta build that allocates nothing however large the
overrides make a model, and the inputs a user types that used to be taken and are refused in one line now.

Clocks are stood in for where a budget is tested (a virtual second per pass), so nothing here depends on how busy
the box is."""

from __future__ import annotations

import dataclasses
import itertools
import tracemalloc
from types import SimpleNamespace

import pytest
import torch
from torch import nn
from torch.overrides import TorchFunctionMode

from tests.tinymodels import TinyCNN
from torchperf_tui.engine.measurements import generation, timing
from torchperf_tui.engine.measurements.ab_arms import parse_arm_spec, refuse_same_arms, same_arms
from torchperf_tui.core.attention_settings import parse_sdpa
from torchperf_tui.engine.measurements.bench_config import BenchConfig
from torchperf_tui.engine.measurements.flags import Flags, pristine_state
from torchperf_tui.core.errors import FlagError, ModelError, ModelTooLarge, ShapeError, TorchperfError
from torchperf_tui.engine.workloads.input_spec import InputSpec
from torchperf_tui.engine.workloads.inputs import parse_dims, parse_shape
from torchperf_tui.engine.workloads.model_args import coerce, literal, parse_model_args
from torchperf_tui.engine.workloads.models import build_model, input_spec_for
from torchperf_tui.engine.workloads.shapes import parse_schedule
from torchperf_tui.engine.workloads.workload import prepare_workload
from torchperf_tui.wording.generation import runs_text
from torchperf_tui.wording.timing import budget_rows

TINY = "tests.tinymodels:tiny_cnn"
TINY_LLAMA = parse_model_args("num_hidden_layers=1,hidden_size=32,intermediate_size=64,num_attention_heads=2,"
                              "num_key_value_heads=2,vocab_size=64")


class VirtualClock:
    """time.perf_counter and perf_counter_ns for a module, advanced by `tick` seconds by each pass of the model."""

    def __init__(self) -> None:
        self.now = 0.0

    def tick(self, seconds: float = 1.0) -> None:
        self.now += seconds

    def module(self):
        return SimpleNamespace(perf_counter=lambda: self.now, perf_counter_ns=lambda: int(self.now * 1e9),
                               time=lambda: self.now)


# -- the time budget covers the warm-up ------------------------------------------------------------------------------

def test_a_long_warm_up_stops_at_the_time_budget_and_the_loop_says_so(monkeypatch):
    clock = VirtualClock()
    monkeypatch.setattr(timing, "time", clock.module())
    times = timing.run_timed_loop(clock.tick, warmup=1_000_000, iters=10, budget_s=5.0)
    # first pass 0-1 s, warm-up passes until the budget is spent at 5 s, then one timed pass
    assert times.warmup_stopped and len(times.warmup_ms) == 4
    assert len(times.samples_ms) == 1 and times.budget_stopped
    assert clock.now == 6.0


def test_an_auto_warm_up_stops_at_the_time_budget_too(monkeypatch):
    clock = VirtualClock()
    monkeypatch.setattr(timing, "time", clock.module())
    times = timing.run_timed_loop(lambda: clock.tick(1.0 + (clock.now % 3)), warmup="auto", iters=3, budget_s=4.0)
    assert times.warmup_stopped and clock.now < timing.STABLE_MAX_SECONDS


def test_a_warm_up_within_the_budget_is_not_marked(monkeypatch):
    clock = VirtualClock()
    monkeypatch.setattr(timing, "time", clock.module())
    times = timing.run_timed_loop(clock.tick, warmup=3, iters=4, budget_s=100.0)
    assert not times.warmup_stopped and not times.budget_stopped
    assert (len(times.warmup_ms), len(times.samples_ms)) == (3, 4)


def test_a_run_whose_warm_up_the_budget_ended_says_it_in_its_note():
    cfg = BenchConfig(model=TINY, input_shape=(1, 3, 8, 8), device="cpu", warmup=10_000, iters=50,
                      time_budget_s=1e-9)
    result = timing.run_benchmark(cfg)
    assert result.warmup_stopped and result.warmup_asked == 10_000 and len(result.samples_ms) == 1
    [(label, text, _)] = budget_rows(result)
    assert label == "note" and text.startswith("the 1e-09 s time budget ran out in the warm-up, after 0 of 10000 "
                                               "warm-up iterations: the model may not have settled")
    assert text.endswith("then 1 of 50 timed iterations ran: the percentiles these samples cannot support are marked")


# -- the shape schedule is drawn as the iterations go --------------------------------------------------------------

def test_a_schedules_shapes_are_a_stream_not_a_list():
    stream = parse_schedule("random:16-32", seed=3).stream((1, 3, 24, 24))
    assert iter(stream) is stream  # an iterator: nothing is drawn before it is asked for
    first = list(itertools.islice(stream, 5))
    assert first == list(itertools.islice(parse_schedule("random:16-32", seed=3).stream((1, 3, 24, 24)), 5))
    with pytest.raises(ShapeError, match="has none"):  # refused when made, not at the first timed iteration
        parse_schedule("random:10-20").stream((4, 512))


def test_a_huge_iteration_count_under_a_time_budget_costs_no_memory_up_front():
    """--iters 20000000 --shapes random:16-32 --time-budget 2 took 45 s and 2.5 GB: a list of every iteration's shape
    was drawn before the first one ran. Drawn as they go, a run of a million asked iterations stopped by its budget
    holds only the shapes it ran."""
    cfg = BenchConfig(model=TINY, input_shape=(1, 3, 24, 24), device="cpu", warmup=0, iters=1_000_000,
                      shapes="random:16-32", time_budget_s=0.2)
    # The imports a first run pays (torch's among them) done before the trace: run first in its worker (or alone),
    # the test traced them (79 MiB) and failed whatever the schedule held.
    timing.run_benchmark(dataclasses.replace(cfg, iters=1, time_budget_s=None))
    tracemalloc.start()
    try:
        result = timing.run_benchmark(cfg)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert result.budget_stopped and len(result.sample_shapes) == len(result.samples_ms) < 1_000_000
    assert peak < 40 * 2**20, f"{peak / 2**20:.0f} MiB traced"  # a list of a million shapes is over 100 MiB


# -- generation's budget --------------------------------------------------------------------------------------------

@pytest.fixture
def virtual_generation(monkeypatch):
    """Each prefill and decode step takes one virtual second (generation's clock is the virtual one)."""
    clock = VirtualClock()

    def sample(fn) -> float:
        fn()
        clock.tick()
        return 1000.0

    monkeypatch.setattr(generation, "time", clock.module())
    monkeypatch.setattr(generation, "token_clock", lambda device: sample)
    return clock


def llama(**overrides) -> BenchConfig:
    values = dict(model="hf:llama", model_args=TINY_LLAMA, device="cpu", seq_len=4)
    return BenchConfig(**{**values, **overrides})


def test_generation_does_not_start_a_run_that_would_end_past_its_budget(virtual_generation):
    """3 tokens: 3 virtual seconds a generation. The warm-up ends at 3 s, the first timed run at 6 s; a second would
    end at 9 s, past the 8 s budget, so it is not started (it was: the budget counted from the timed runs only, and
    a run was started while any of it was left)."""
    result = generation.run_generation(llama(time_budget_s=8.0), 3, runs=5)
    assert result.runs == 1 and result.budget_stopped and result.next_run_s == 3.0
    assert virtual_generation.now <= 8.0
    assert runs_text(result) == ("1 timed after 1 warm-up generation (5 asked: another, at about 3.0 s like the "
                                 "last, would end past the 8 s time budget, so it was not started)")


def test_generations_budget_covers_its_warm_up(virtual_generation):
    result = generation.run_generation(llama(time_budget_s=1.5), 3, runs=5)
    assert result.warmup_stopped and len(result.warmup_decode_ms) == 1  # the prefill, one step, then 2 s >= 1.5 s
    assert result.runs == 1 and result.budget_stopped  # one timed generation still runs: a result needs one
    assert runs_text(result).startswith("1 timed after 1 warm-up generation (cut at the 1.5 s time budget after 2 of "
                                        "3 tokens: the model may not have settled) (5 asked")


def test_generation_within_its_budget_runs_every_run(virtual_generation):
    result = generation.run_generation(llama(time_budget_s=100.0), 3, runs=2)
    assert result.runs == 2 and not result.budget_stopped and not result.warmup_stopped


# -- a meta build allocates nothing; a run refuses what cannot fit -------------------------------------------------

def test_a_meta_build_makes_a_huge_layer_on_meta_without_a_cpu_allocation():
    """resnet18 with num_classes=99999999999 asked the CPU for 204 TB while building 'on meta' (that count is now
    refused as an override; two thousand million classes, 4 TB of weights, still is a count to analyse)."""
    made: list[tuple] = []  # every tensor the build asked a factory for, as the factory got the call

    class Factories(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            if getattr(func, "__name__", "") == "empty":
                made.append((args, dict(kwargs or {})))
            return func(*args, **(kwargs or {}))

    with Factories():  # outside the build's own mode: it sees the calls that mode lets through
        model = build_model("resnet18", "meta", model_args=parse_model_args("num_classes=2000000000"))
    assert model.fc.weight.device.type == "meta" and tuple(model.fc.weight.shape) == (2_000_000_000, 512)
    large = [kwargs.get("device") for args, kwargs in made if 2_000_000_000 in (args[0] if args and
                                                                               isinstance(args[0], tuple) else args)]
    assert large and all(str(device) == "meta" for device in large), large  # never a CPU allocation


def test_a_meta_build_still_computes_small_tensors_on_the_cpu():
    """A builder's own arithmetic (regnet's widths) runs on the CPU: only tensors too large for it go to meta."""
    model = build_model("regnet_y_400mf", "meta")
    assert all(p.device.type == "meta" for p in model.parameters())


def test_a_run_refuses_a_torchvision_model_its_overrides_make_too_large_before_building_it():
    inputs = InputSpec((1, 3, 32, 32))
    with pytest.raises(ModelTooLarge, match=r"^resnet18: 1.03 T parameters are .* free; give --model-args "
                                            r"values smaller than num_classes=2000000000"):
        prepare_workload("resnet18", inputs, torch.device("cpu"), torch.float32,
                         model_args=parse_model_args("num_classes=2000000000"))


def test_a_list_override_reaches_the_builder_and_a_refusal_of_it_is_one_line():
    args = parse_model_args("replace_stride_with_dilation=[False,True,True]")
    assert args == (("replace_stride_with_dilation", "[False,True,True]"),)
    model = build_model("resnet50", "meta", model_args=args)
    assert model.layer4[0].conv2.dilation == (2, 2)
    with pytest.raises(ModelError, match="^cannot build resnet18: Dilation > 1 not supported in BasicBlock$"):
        build_model("resnet18", "meta", model_args=parse_model_args("replace_stride_with_dilation=[True,False,False]"))


@pytest.mark.parametrize("text", ["[True,False", "[" * 10_000, "{'a': 1"])
def test_a_malformed_list_override_is_refused_not_passed_on_as_text(text):
    with pytest.raises(ModelError, match="not a Python literal"):
        literal("resnet18", "replace_stride_with_dilation", text)


@pytest.mark.parametrize("text", [str(2**62), str(2**31)])
def test_a_whole_number_override_past_a_32_bit_dimension_is_refused(text):
    """num_classes=2**62 was 'Storage size calculation overflowed', an internal error, from inside the meta build."""
    with pytest.raises(ModelError, match=f"^resnet18: num_classes={text}: it must be at most 2,147,483,647$"):
        coerce("resnet18", "num_classes", text, 1000)
    with pytest.raises(ModelError, match="at most 2,147,483,647"):
        literal("hf:llama", "head_dim", text)  # a setting whose default is None
    assert coerce("resnet18", "num_classes", str(2**31 - 1), 1000) == 2**31 - 1


@pytest.mark.parametrize("key", ["rms_norm_eps", "layer_norm_eps", "norm_epsilon"])
@pytest.mark.parametrize("value", ["-1", "0", "-1e-308"])
def test_a_normalisations_epsilon_at_or_below_0_is_refused(key, value):
    with pytest.raises(ModelError, match=f"^hf:llama: {key}={value}: an epsilon must be above 0"):
        coerce("hf:llama", key, value, 1e-6)
    assert coerce("hf:llama", key, "1e-5", 1e-6) == 1e-5


def test_hf_llama_with_a_negative_rms_norm_eps_is_refused_in_one_line():
    with pytest.raises(ModelError, match="rms_norm_eps=-1: an epsilon must be above 0"):
        input_spec_for("hf:llama", batch=1, model_args=(*TINY_LLAMA, ("rms_norm_eps", "-1")))


# -- a factory's example_inputs that is not a function --------------------------------------------------------------

def not_callable_examples() -> nn.Module:
    return TinyCNN()


not_callable_examples.example_inputs = (1, 3, 8, 8)  # a shape, not a function: was passed over for the default


def test_a_factorys_example_inputs_that_is_not_a_function_is_refused_in_one_line():
    spec = "tests.engine.test_run_bounds:not_callable_examples"
    with pytest.raises(ModelError, match=r"example_inputs is a tuple, not a function: define it as "
                                         r"example_inputs\(batch, device, dtype\)"):
        input_spec_for(spec, batch=1)


# -- what a user types --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("text", ["1xx3x32x32", "1x3x", "x1x3", "1,,3", "1x+3x3"])
def test_a_shape_with_an_empty_or_signed_dimension_is_malformed(text):
    with pytest.raises(ShapeError, match="malformed input shape"):
        parse_shape(text)


def test_the_apps_input_field_refuses_an_empty_dimension_too():
    with pytest.raises(ShapeError, match="is not a shape"):
        parse_dims("3xx32x32")
    assert parse_shape(" 1 x 3 x 8 x 8 ") == (1, 3, 8, 8) and parse_shape("1 3 8 8") == (1, 3, 8, 8)


@pytest.mark.parametrize("typed", ["512_4_4", "+3", "1e3", "٣", "3.0", ""])
def test_the_apps_batch_and_length_fields_take_only_digits_as_a_dimension_does(typed):
    """Model arguments typed into the batch field by mistake ('512_4_4': the integer field keeps digits and
    underscores) must not become a batch of 51244: Python's int() would read it so."""
    from torchperf_tui.engine.workloads.inputs import parse_batch, parse_seq_len

    with pytest.raises(ShapeError, match="is not a whole number"):
        parse_batch(typed)
    with pytest.raises(ShapeError, match="is not a whole number"):
        parse_seq_len(typed)
    assert parse_batch(" 32 ") == 32 and parse_seq_len("128") == 128


def test_an_sdpa_backend_named_twice_is_refused():
    with pytest.raises(FlagError, match="flash given twice"):
        parse_sdpa("flash+flash")
    with pytest.raises(FlagError, match="math given twice"):
        Flags().replace(sdpa="math+MATH")
    assert parse_sdpa("math+flash") == "flash+math"


def test_an_empty_schedule_is_refused_and_none_is_fixed():
    with pytest.raises(ShapeError, match="empty shape schedule"):
        parse_schedule("  ")
    assert parse_schedule(None).describe() == "fixed"


@pytest.mark.parametrize("spec", ["cudnn_benchmark=on,,tf32=on", "threads=1,", ",mkldnn=off", ","])
def test_an_empty_item_in_an_arm_is_refused(spec):
    with pytest.raises(FlagError, match="has an empty item"):
        parse_arm_spec(spec)
    assert parse_arm_spec("  ").text == "base"


def test_arms_are_compared_as_they_resolve():
    base = BenchConfig(model=TINY)
    default = pristine_state().flags.num_threads
    a, b = parse_arm_spec(f"threads={default}"), parse_arm_spec("")
    assert not same_arms(base, a, b) and same_arms(base, a, b, default_threads=default)
    assert not same_arms(base, a, b, default_threads=default + 1)
    with pytest.raises(TorchperfError, match=f"threads left empty runs this machine's default, {default}"):
        refuse_same_arms(base, a, b, "remedy")
    refuse_same_arms(base, parse_arm_spec("mkldnn=off"), b, "remedy")  # different arms pass
