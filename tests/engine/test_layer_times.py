import time
from collections import namedtuple
from types import SimpleNamespace

import pytest
import torch
from torch import nn

from torchperf_tui.core.errors import TorchperfError
from torchperf_tui.engine.workloads.layer_ranges import BACKWARD_PREFIX, ITERATION_LABEL, LAYER_PREFIX
from torchperf_tui.engine.analysis.layer_times import attribute, layer_times
from torchperf_tui.engine.measurements.bench_config import BenchConfig

TINY = "tests.tinymodels:tiny_cnn"
Kernel = namedtuple("Kernel", "name device duration")
CPU = SimpleNamespace(name="CPU")
CUDA = SimpleNamespace(name="CUDA")


SLEEP_MS = 200.0  # far above what a 4-channel conv on 8x8 takes, even descheduled on a box with burners beside it


class Sleepy(nn.Module):
    """A layer that takes SLEEP_MS of wall time and no FLOPs: it must top the table."""

    def forward(self, x):
        time.sleep(SLEEP_MS / 1000)
        return x


class WithASleepyLayer(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3)
        self.wait = Sleepy()

    def forward(self, x):
        return torch.relu(self.wait(self.conv(x)))  # relu: the model's own code, outside every leaf


def test_on_the_cpu_each_module_gets_its_own_wall_time_and_the_rows_add_up_to_the_pass():
    result = layer_times(BenchConfig(model=WithASleepyLayer(), input_shape=(1, 3, 8, 8), device="cpu"),
                         iters=2, warmup=1)
    by_name = result.by_name()
    assert set(by_name) == {"", "conv", "wait"} and result.kind == "cpu" and result.gpu is None
    assert by_name["wait"].forward_ms >= SLEEP_MS and by_name["wait"].leaf and not by_name[""].leaf
    assert by_name["wait"].forward_ms > by_name["conv"].forward_ms > 0 and by_name[""].forward_ms > 0
    assert all(m.calls == 1 and m.backward_ms == 0 for m in result.modules)
    assert result.pass_ms >= SLEEP_MS and result.accounted_ms == pytest.approx(result.pass_ms, rel=1e-9)
    assert [m.name for m in result.modules] == ["", "conv", "wait"]  # in the order they ran
    # An inference pass on the CPU is clocked by the hooks themselves, without the profiler's cost.
    assert result.iters == 2 and "no profiler" in result.method and "mean of 2 passes" in result.method
    data = result.to_dict()
    assert data["modules"][0]["ms"] == data["modules"][0]["forward_ms"] and data["gpu"] is None


def test_a_training_step_gives_each_layer_its_backward_and_says_the_loss_and_optimizer_apart():
    result = layer_times(BenchConfig(model=TINY, input_shape=(2, 3, 16, 16), device="cpu", step="train"),
                         iters=2, warmup=1)
    by_name = result.by_name()
    assert by_name["conv"].backward_ms > 0 and by_name["fc"].backward_ms > 0
    assert by_name["pool"].calls == 1 and result.step.startswith("train")
    assert result.outside["optimizer step"] > 0 and result.outside["loss"] > 0
    assert result.accounted_ms == pytest.approx(result.pass_ms, rel=1e-9)
    assert "profiler range" in result.method and "2 profiled passes" in result.method


def test_what_cannot_be_timed_per_layer_says_why():
    with pytest.raises(TorchperfError, match="torch.compile"):
        layer_times(BenchConfig(model=TINY, input_shape=(1, 3, 16, 16), device="cpu", compile="default"))
    with pytest.raises(TorchperfError, match="one input shape"):
        layer_times(BenchConfig(model=TINY, input_shape=(1, 3, 16, 16), device="cpu", shapes="cycle:1,2"))
    with pytest.raises(TorchperfError, match="at least 1"):
        layer_times(BenchConfig(model=TINY, input_shape=(1, 3, 16, 16), device="cpu"), iters=0)


def test_cancelled_before_a_pass_is_an_empty_cancelled_result():
    result = layer_times(BenchConfig(model=TINY, input_shape=(1, 3, 16, 16), device="cpu"), iters=2,
                         should_cancel=lambda: True)
    assert result.cancelled and result.modules == [] and result.iters == 0


# -- a GPU's events, as the profiler gives them -------------------------------------------------------------
def _event(name, start, end, children=(), kernels=(), device_type=CPU, seq=-1, thread=1, fwd_thread=None):
    event = SimpleNamespace(name=name, time_range=SimpleNamespace(start=start, end=end), cpu_children=list(children),
                            kernels=list(kernels), device_type=device_type, sequence_nr=seq, thread=thread,
                            fwd_thread=fwd_thread, cpu_parent=None)
    for child in event.cpu_children:
        child.cpu_parent = event
    return event


def test_on_a_gpu_modules_get_their_kernels_time_and_the_idle_time_says_launch_bound():
    fc_op = _event("aten::addmm", 30, 60, kernels=[Kernel("gemm", 0, 100.0)], seq=7)
    fc = _event(LAYER_PREFIX + "fc", 20, 500, [fc_op])
    root_op = _event("aten::relu", 510, 520, kernels=[Kernel("relu_kernel", 0, 50.0)], seq=8)
    root = _event(LAYER_PREFIX, 10, 900, [fc, root_op])
    iteration = _event(ITERATION_LABEL, 0, 1000, [root])
    backward = _event(BACKWARD_PREFIX + "AddmmBackward0", 600, 700, kernels=[Kernel("gemm_dgrad", 0, 30.0)],
                      seq=7, thread=2, fwd_thread=1)
    device = [_event("gemm", 100, 200, device_type=CUDA), _event("relu_kernel", 150, 260, device_type=CUDA),
              _event("gemm_dgrad", 600, 650, device_type=CUDA),
              _event(LAYER_PREFIX + "fc", 20, 500, device_type=CUDA)]  # a range's GPU-side copy: not work
    modules = {"": nn.Sequential(nn.Linear(1, 1)), "fc": nn.Linear(1, 1)}
    rows, outside, pass_ms, gpu, n = attribute([iteration, backward, *device], modules, on_cuda=True)
    by_name = {m.name: m for m in rows}
    assert by_name["fc"].forward_ms == pytest.approx(0.1) and by_name["fc"].backward_ms == pytest.approx(0.03)
    assert by_name[""].forward_ms == pytest.approx(0.05) and by_name["fc"].kernels == 2 and n == 1
    assert pass_ms == pytest.approx(1.0) and outside == {}
    assert gpu.busy_ms == pytest.approx(0.21) and gpu.kernels == 3  # [100, 260] and [600, 650]
    assert gpu.idle_pct == pytest.approx(79.0) and "launch-bound" in gpu.summary()


@pytest.mark.gpu
def test_gpu_layer_times_of_a_real_model():
    result = layer_times(BenchConfig(model=TINY, input_shape=(8, 3, 32, 32), device="cuda"), iters=3)
    assert result.kind == "cuda" and result.gpu is not None
    assert 0 < result.gpu.busy_ms <= result.gpu.wall_ms and result.gpu.kernels > 0
    assert result.by_name()["conv"].forward_ms > 0 and result.by_name()["conv"].kernels >= 1


class Raises(nn.Module):
    def forward(self, x):
        raise ValueError("bad input")


def test_wrapped_forwards_are_undone_and_a_raising_forward_still_closes_its_span():
    from torchperf_tui.engine.workloads.layer_ranges import wrap_forwards

    plain, patched, raising = nn.Linear(2, 2), nn.Linear(2, 2), Raises()
    own = patched.forward = lambda x: x  # a forward set on the instance before ours
    calls = []
    handles = wrap_forwards([("plain", plain), ("patched", patched), ("raising", raising)], calls.append,
                            lambda: calls.append("leave"))
    plain(torch.zeros(1, 2))
    patched(torch.zeros(1, 2))
    with pytest.raises(ValueError):
        raising(torch.zeros(1))
    assert calls == ["plain", "leave", "patched", "leave", "raising", "leave"]
    for handle in handles:
        handle.remove()
    assert "forward" not in plain.__dict__ and "forward" not in raising.__dict__ and patched.forward is own
    plain(torch.zeros(1, 2))
    assert len(calls) == 6  # unwrapped: nothing is called any more
