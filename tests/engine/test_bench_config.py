"""The one preamble of every runner: BenchConfig.prepare() checks the device, the dtype, the step, the mixed
precision and the input shape once, in that order, and gives the run's plan."""

import subprocess
import sys
from pathlib import Path

import pytest
import torch

from torchperf_tui.engine.measurements.abtest import ArmSpec, run_ab
from torchperf_tui.engine.measurements.bench_config import BenchConfig, RunPlan
from torchperf_tui.engine.measurements.determinism import determinism_of
from torchperf_tui.core.errors import DeviceError, ShapeError, TorchperfError
from torchperf_tui.engine.measurements.flags import Flags
from torchperf_tui.engine.workloads.input_spec import InputSpec
from torchperf_tui.engine.analysis.kernels import conv_kernels
from torchperf_tui.engine.analysis.layer_times import layer_times
from torchperf_tui.engine.analysis.profiling import profile_model
from torchperf_tui.engine.measurements.throughput import find_max_batch
from torchperf_tui.engine.measurements.timing import run_benchmark
from torchperf_tui.engine.measurements.timing_modes import run_modes
from torchperf_tui.engine.measurements.train_step import StepSpec, amp_problem

TINY = "tests.tinymodels:tiny_cnn"
COUNTED = "tests.engine.test_bench_config:counted_cnn"
built: list[str] = []


def counted_cnn() -> torch.nn.Module:
    from tests.tinymodels import tiny_cnn

    built.append("cnn")
    return tiny_cnn()


def test_the_plan_holds_the_device_dtype_step_and_inputs():
    plan = BenchConfig(model=TINY, input_shape=(1, 3, 8, 8), batch=4, device="cpu", dtype="bf16", step="train",
                       optimizer="adamw").prepare()
    assert isinstance(plan, RunPlan)
    assert plan.device == torch.device("cpu") and plan.dtype is torch.bfloat16
    assert plan.step == StepSpec(step="train", optimizer="adamw")
    assert plan.inputs == InputSpec((4, 3, 8, 8)) and plan.shape == (4, 3, 8, 8)


def test_a_name_without_a_shape_takes_the_catalogues_default_at_the_batch():
    plan = BenchConfig(model="resnet18", batch=2, device="cpu").prepare()
    assert plan.shape == (2, 3, 224, 224)


@pytest.mark.parametrize("cfg, error, words", [
    (dict(device="tpu", dtype="int3", step="walk"), DeviceError, "unknown device"),  # the device first
    (dict(dtype="int3", step="walk"), ShapeError, "unknown dtype"),  # then the dtype
    (dict(step="walk", amp="bf16", dtype="float16"), TorchperfError, "choose infer or train"),  # then the step
    (dict(amp="bf16", dtype="float16", input_shape=(0, 3, 8, 8)), TorchperfError, "use --dtype float32"),
    (dict(input_shape=(0, 3, 8, 8)), ShapeError, "dimension <= 0"),  # the shape last
])
def test_checks_come_in_one_order(cfg, error, words):
    with pytest.raises(error, match=words):
        BenchConfig(**{"model": TINY, "input_shape": (1, 3, 8, 8), "device": "cpu", **cfg}).prepare()


def test_the_mixed_precision_refusal_is_amp_problems_line():
    cfg = BenchConfig(model=TINY, input_shape=(1, 3, 8, 8), device="cpu", dtype="float16", amp="bf16")
    with pytest.raises(TorchperfError) as caught:
        cfg.prepare()
    assert str(caught.value) == amp_problem("bf16", torch.device("cpu"), torch.float16)


def test_a_runners_own_checks_run_before_and_after_the_mixed_precision_check():
    seen = []
    cfg = BenchConfig(model=TINY, input_shape=(1, 3, 8, 8), device="cpu", dtype="float16", amp="bf16")
    with pytest.raises(TorchperfError, match="float32 with it"):
        cfg.prepare(before_amp=lambda device, step: seen.append(("before_amp", device.type, step.amp)),
                    before_inputs=lambda device, step: seen.append(("before_inputs",)))
    assert seen == [("before_amp", "cpu", "bf16")]  # the amp refusal came before the second check

    def refuse(device, step):
        raise TorchperfError("this runner needs something else")

    with pytest.raises(TorchperfError, match="needs something else"):
        cfg.prepare(before_amp=refuse)


def test_arms_are_checked_for_mixed_precision_each_with_its_own_step_and_dtype():
    cfg = BenchConfig(model=TINY, input_shape=(1, 3, 8, 8), device="cpu", dtype="float16")
    plan = cfg.prepare(amp_for=[(StepSpec(amp="bf16"), "float32"), (StepSpec(), "float16")])
    assert plan.dtype is torch.float16  # the config's own dtype (float16) was not checked against an amp
    with pytest.raises(TorchperfError, match="the model is bfloat16"):
        cfg.prepare(amp_for=[(StepSpec(), "float32"), (StepSpec(amp="bf16"), "bfloat16")])


def test_a_config_imports_no_torch():
    code = ("import sys; from torchperf_tui.engine.measurements.bench_config import BenchConfig; "
            "BenchConfig(model='resnet18', batch=2); print('torch' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          cwd=str(Path(__file__).resolve().parents[2]))
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["False"]


def runners_of(config: dict, arm_a_dtype: str) -> dict:
    """Every runner on BenchConfig(**config); the A/B and the kernels with arm A in `arm_a_dtype` (the base
    config's dtype) and arm B in bfloat16."""
    def arms():
        return BenchConfig(**{**config, "dtype": arm_a_dtype}), ArmSpec(Flags()), ArmSpec(Flags(), dtype="bfloat16")

    return {
        "timing": lambda: run_benchmark(BenchConfig(**config)),
        "throughput": lambda: find_max_batch(BenchConfig(**config)),
        "profiling": lambda: profile_model(BenchConfig(**config), iters=1),
        "layer times": lambda: layer_times(BenchConfig(**config), iters=1),
        "timing modes": lambda: run_modes(BenchConfig(**config), ("sync",)),
        "determinism": lambda: determinism_of(BenchConfig(**config)),
        "a/b": lambda: run_ab(*arms(), blocks=6, per_block=1),
        "kernels": lambda: conv_kernels(*arms(), iters=1),
    }


CAST = dict(model=COUNTED, input_shape=(1, 3, 8, 8), device="cpu", dtype="bfloat16", amp="bf16", iters=2, warmup=0)
RUNNERS = runners_of(CAST, arm_a_dtype="float32")  # arm B is the cast one


@pytest.mark.parametrize("runner", list(RUNNERS))
def test_every_runner_refuses_mixed_precision_over_a_cast_model_in_one_line_before_building_it(runner):
    built.clear()
    with pytest.raises(TorchperfError) as caught:
        RUNNERS[runner]()
    assert str(caught.value) == amp_problem("bf16", torch.device("cpu"), torch.bfloat16)
    assert built == []


# Two things wrong at once: an unknown dtype and a shape with a zero dimension. The one preamble checks the dtype
# first, so every runner names the dtype (the determinism check used to resolve the shape first and name it).
BOTH_WRONG = dict(model=COUNTED, input_shape=(0, 3, 8, 8), device="cpu", dtype="float7", iters=2, warmup=0)
RUNNERS_BOTH_WRONG = runners_of(BOTH_WRONG, arm_a_dtype="float7")


@pytest.mark.parametrize("runner", list(RUNNERS_BOTH_WRONG))
def test_every_runner_names_a_bad_dtype_before_a_bad_shape(runner):
    built.clear()
    with pytest.raises(TorchperfError) as caught:
        RUNNERS_BOTH_WRONG[runner]()
    assert "float7" in str(caught.value) and "dimension" not in str(caught.value)
    assert built == []


def test_the_determinism_check_takes_its_config_whole():
    """The runner's config reaches the check as it is: its seed, its flags and its channels_last."""
    cfg = BenchConfig(model=TINY, input_shape=(1, 3, 8, 8), device="cpu", channels_last=True, seed=3,
                      flags=Flags(mkldnn_enabled=False))
    report = determinism_of(cfg, runs=2)
    assert report.channels_last and report.flags == cfg.flags and report.input_shape == (1, 3, 8, 8)
