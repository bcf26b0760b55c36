"""Models that do not take one float tensor, end to end on the CPU: a factory's example_inputs as a tuple (two
positional tensors) or a dict (keyword token ids and a mask, a dict out), timed, counted, trained and compared;
and a factory whose example_inputs fails or returns something else, in one line."""

from __future__ import annotations

import pytest

from torchperf_tui.engine.measurements.abtest import ArmSpec, run_ab
from torchperf_tui.engine.measurements.bench_config import BenchConfig
from torchperf_tui.engine.measurements.flags import Flags
from torchperf_tui.engine.measurements.timing import run_benchmark
from torchperf_tui.engine.workloads.loss import LOSS_CROSS_ENTROPY, LOSS_NEXT_TOKEN
from torchperf_tui.core.errors import ModelError, ShapeError
from torchperf_tui.engine.workloads.complexity import analyse_complexity

TWO = "tests.tinymodels:two_inputs"
KEYWORDS = "tests.tinymodels:keyword_inputs"


@pytest.mark.parametrize("spec", [TWO, KEYWORDS])
def test_a_factorys_example_inputs_are_timed_and_said(spec):
    result = run_benchmark(BenchConfig(model=spec, batch=2, device="cpu", warmup=1, iters=3))
    assert len(result.samples_ms) == 3 and result.stats is not None
    assert result.input_shape == (2,) and "example_inputs at batch 2" in result.inputs


def test_keyword_token_inputs_train_on_their_next_token_loss_and_a_tuple_on_the_sum():
    keywords = run_benchmark(BenchConfig(model=KEYWORDS, batch=2, device="cpu", warmup=1, iters=2, step="train"))
    assert keywords.loss == LOSS_NEXT_TOKEN
    two = run_benchmark(BenchConfig(model=TWO, batch=2, device="cpu", warmup=1, iters=2, step="train"))
    assert two.loss == LOSS_CROSS_ENTROPY  # (batch, 3) logits: a classifier's


def test_the_inputs_reach_the_analysis_and_an_ab():
    c = analyse_complexity(KEYWORDS, (2,), inputs=BenchConfig(model=KEYWORDS, batch=2).input_spec())
    assert c.flops > 0 and c.params_total > 0
    ab = run_ab(BenchConfig(model=TWO, batch=1, device="cpu"), ArmSpec(flags=Flags()),
                ArmSpec(flags=Flags(num_threads=1)), blocks=6, per_block=1, seed=0)
    assert ab.a.samples_ms and ab.b.samples_ms


@pytest.mark.parametrize("spec, message", [("tests.tinymodels:bad_examples", "must return a tensor"),
                                           ("tests.tinymodels:failing_examples", "raised RuntimeError: no data")])
def test_a_factory_whose_example_inputs_misbehave_is_one_line(spec, message):
    with pytest.raises(ModelError, match=message):
        run_benchmark(BenchConfig(model=spec, batch=1, device="cpu", warmup=0, iters=1))


def test_a_shape_schedule_is_refused_for_inputs_a_factory_makes():
    with pytest.raises(ShapeError, match="example_inputs makes the inputs"):
        run_benchmark(BenchConfig(model=TWO, batch=1, device="cpu", warmup=0, iters=2, shapes="cycle:2"))
