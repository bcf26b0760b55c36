"""A follow-up of a finished run (its roofline, the time of each layer) measures again what the run measured: the
BenchConfig the run carries, as it resolved it, not one rebuilt from the result's copied fields."""

from __future__ import annotations

import dataclasses

import pytest

from torchperf_tui.core.errors import TorchperfError
from torchperf_tui.engine.measurements.bench_config import BenchConfig
from torchperf_tui.engine.measurements.timing import run_benchmark
from torchperf_tui.measure.follow_up import layer_times_of_run, measured_config

TINY = "tests.tinymodels:tiny_cnn"


def test_a_run_carries_what_it_measured_as_resolved_and_its_follow_up_measures_that():
    asked = BenchConfig(model=TINY, batch=2, input_shape=(5, 3, 16, 16), device="auto", warmup=0, iters=2,
                        time_budget_s=None)
    result = run_benchmark(asked)
    # the device and the batch as they resolved, the rest as asked
    assert result.config == dataclasses.replace(asked, device="cpu", input_shape=(2, 3, 16, 16), batch=None)
    assert "config" not in result.to_dict()  # the JSON keeps its keys: the config's fields are the result's own
    roofline = layer_times_of_run(result, iters=1)
    assert roofline is not None and [layer.name for layer in roofline.layers]
    assert roofline.input_shape == (2, 3, 16, 16)


def test_a_result_that_does_not_say_what_it_measured_is_one_line():
    result = run_benchmark(BenchConfig(model=TINY, input_shape=(1, 3, 8, 8), device="cpu", warmup=0, iters=1,
                                       time_budget_s=None))
    result.config = None  # as a result from a version before it carried one
    with pytest.raises(TorchperfError, match="does not say what it measured"):
        measured_config(result)
