"""Determinism check: bitwise equality or the size of the differences, for every output leaf."""

from __future__ import annotations

import json

import pytest
import torch
from torch import nn

from torchperf_tui.engine.measurements.determinism import check_determinism
from torchperf_tui.core.errors import TorchperfError
from torchperf_tui.engine.measurements.flags import Flags
from torchperf_tui.engine.workloads.inputs import make_input

TINY = "tests.tinymodels:tiny_cnn"
SHAPE = (2, 3, 8, 8)


class NoisyModel(nn.Module):
    """Adds fresh Gaussian noise on every call and keeps each draw, so a test knows the true differences."""

    def __init__(self, scale: float = 1e-3) -> None:
        super().__init__()
        self.scale = scale
        self.noise: list[torch.Tensor] = []

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        noise = torch.randn_like(x) * self.scale
        self.noise.append(noise.clone())
        return x + noise


class SegmentationLike(nn.Module):
    """Returns a dict, as torchvision's segmentation models do: a deterministic 'out' and a noisy 'aux'."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)

    def forward(self, x: torch.Tensor) -> dict[str, torch.Tensor]:
        return {"out": self.conv(x), "aux": x + torch.randn_like(x)}


class FlagSpy(nn.Module):
    """Records the global torch state it runs under."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[tuple[int, bool, bool]] = []

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        self.seen.append((torch.get_num_threads(), torch.are_deterministic_algorithms_enabled(),
                          torch.backends.mkldnn.enabled))
        return x * 2, x.sum()


class SignedZero(nn.Module):
    """Returns 0.0 on the first call and -0.0 on the second: equal as numbers, not as bits."""

    def __init__(self) -> None:
        super().__init__()
        self.calls = 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        out = torch.zeros(3)
        out[0] = 0.0 if self.calls == 1 else -0.0
        out[1] = float("nan")  # the same NaN every time: bitwise equal
        return out


class GrowingOutput(nn.Module):
    """One more element per call, as a detector's box count can change between runs."""

    def __init__(self) -> None:
        super().__init__()
        self.calls = 0

    def forward(self, x: torch.Tensor) -> list[torch.Tensor]:
        self.calls += 1
        return [x, torch.ones(self.calls, 4)]


def test_deterministic_model_is_bitwise_equal_on_cpu():
    report = check_determinism(TINY, SHAPE, device="cpu", runs=3)
    assert report.bitwise_equal
    assert (report.max_abs_diff, report.max_rel_diff, report.differing_elements) == (0.0, 0.0, 0)
    assert report.total_elements == 2 * 10 and report.runs == 3 and report.device == "cpu"
    assert report.summary().startswith("deterministic: 3 runs bitwise identical")


def test_noisy_model_is_not_equal_and_reports_the_true_differences():
    torch.manual_seed(1234)
    model = NoisyModel(scale=1e-3)
    report = check_determinism(model, SHAPE, device="cpu", runs=3)
    x = make_input(SHAPE)  # the check's input: seed 0
    outs = [x + n for n in model.noise]
    assert len(outs) == 3
    expected_abs = max(float((outs[k] - outs[0]).abs().max()) for k in (1, 2))
    expected_rel = max(float(((outs[k] - outs[0]).abs() / torch.maximum(outs[k].abs(), outs[0].abs())).max())
                       for k in (1, 2))
    assert not report.bitwise_equal
    assert report.max_abs_diff == pytest.approx(expected_abs, rel=1e-6)
    assert report.max_rel_diff == pytest.approx(expected_rel, rel=1e-6)
    assert report.differing_elements == report.total_elements == x.numel()  # Gaussian noise moves every element
    assert "not deterministic" in report.summary() and f"{x.numel()}" in report.summary()


def test_dict_outputs_are_compared_leaf_by_leaf():
    report = check_determinism(SegmentationLike(), SHAPE, device="cpu")
    leaves = {leaf.path: leaf for leaf in report.leaves}
    assert set(leaves) == {"['out']", "['aux']"}
    assert leaves["['out']"].bitwise_equal and leaves["['out']"].total_elements == 2 * 4 * 8 * 8
    assert not leaves["['aux']"].bitwise_equal
    assert report.differing_elements == leaves["['aux']"].differing_elements == 2 * 3 * 8 * 8
    assert not report.bitwise_equal


def test_flags_apply_during_the_runs_and_are_restored_after():
    before = Flags.current()
    spy = FlagSpy()
    flags = Flags(num_threads=1, deterministic_algorithms=True, mkldnn_enabled=False)
    report = check_determinism(spy, SHAPE, device="cpu", flags=flags)
    assert spy.seen == [(1, True, False)] * 2
    assert Flags.current() == before
    assert report.flags == flags and report.bitwise_equal
    assert [leaf.path for leaf in report.leaves] == ["[0]", "[1]"]  # tuple outputs too


def test_bitwise_means_bits_signed_zero_differs_and_a_repeated_nan_does_not():
    report = check_determinism(SignedZero(), (1, 1), device="cpu")
    assert not report.bitwise_equal
    assert report.differing_elements == 1 and report.max_abs_diff == 0.0


def test_an_output_that_changes_shape_is_reported_not_crashed_on():
    report = check_determinism(GrowingOutput(), SHAPE, device="cpu")
    assert not report.bitwise_equal
    assert len(report.mismatches) == 1 and "[1]" in report.mismatches[0]
    assert "changed shape or value" in report.summary()


def test_report_as_json_is_strict_and_says_what_the_report_says():
    report = check_determinism(NoisyModel(), SHAPE, device="cpu")
    data = json.loads(json.dumps(report.to_dict(), allow_nan=False))  # what `determinism --json` prints
    assert data["bitwise_equal"] is False and data["max_abs_diff"] == report.max_abs_diff > 0
    assert data["input_shape"] == list(SHAPE) and data["flags"] == report.flags.to_dict()
    assert [leaf["shape"] for leaf in data["leaves"]] == [list(leaf.shape) for leaf in report.leaves]


def test_fewer_than_two_runs_is_a_user_error():
    with pytest.raises(TorchperfError, match="at least 2 runs"):
        check_determinism(TINY, SHAPE, device="cpu", runs=1)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_conv_model_on_cuda_with_cudnn_deterministic_is_bitwise_equal():
    flags = Flags(cudnn_deterministic=True, cudnn_benchmark=False)
    before = Flags.current()
    report = check_determinism("resnet18", (8, 3, 224, 224), device="cuda", flags=flags, runs=3)
    assert report.bitwise_equal, report.summary()
    assert report.device.startswith("cuda") and report.total_elements == 8 * 1000
    assert Flags.current() == before
