"""Tiny models for fast tests, loaded through the same `module:factory` path a user's own model takes."""

from __future__ import annotations

import time

import torch
from torch import nn


class TinyCNN(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(8, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.relu(self.bn(self.conv(x)))
        return self.fc(torch.flatten(self.pool(x), 1))


def tiny_cnn() -> nn.Module:
    return TinyCNN()


class OutOfMemoryModel(nn.Module):
    """Raises the real exception type a CUDA allocation failure raises."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 20.00 GiB")


def oom_model() -> nn.Module:
    return OutOfMemoryModel()


class ThreadsProbe(TinyCNN):
    """Records torch's intra-op thread count at every forward pass: what the flags were while it ran."""

    seen: list[int] = []

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        ThreadsProbe.seen.append(torch.get_num_threads())
        return super().forward(x)


def threads_probe() -> nn.Module:
    return ThreadsProbe()


class PerCallCost(TinyCNN):
    """A fixed 10 ms per call whatever the batch (a launch-bound model's shape): samples/s doubles with each
    doubling of the batch, a gain no scheduling noise on a busy test box can turn into a plateau."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.device.type != "meta":
            time.sleep(0.010)
        return super().forward(x)


def per_call_cost() -> nn.Module:
    return PerCallCost()


class SlowPerCallCost(PerCallCost):
    """50 ms a call: for a search whose tries time 3 iterations each, where a 10 ms call came back from a
    descheduling on a box with two CPU burners beside the suite at 2-3x its time and a doubling of the batch
    looked like no gain (the search stopped at batch 4 in two stress runs)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.device.type != "meta":
            time.sleep(0.040)  # + PerCallCost's 10 ms
        return super().forward(x)


def slow_per_call_cost() -> nn.Module:
    return SlowPerCallCost()


class FixedSize(TinyCNN):
    """Takes only 16x16 images, as a ViT takes only its own image size."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        torch._assert(x.shape[-1] == 16 and x.shape[-2] == 16, f"Wrong image size! Expected 16 but got {x.shape[-1]}")
        return super().forward(x)


def fixed_size() -> nn.Module:
    return FixedSize()


class ThreadIdentProbe(TinyCNN):
    """Records the thread each forward pass ran on."""

    seen: list[int] = []

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        import threading

        ThreadIdentProbe.seen.append(threading.get_ident())
        return super().forward(x)


def thread_probe() -> nn.Module:
    return ThreadIdentProbe()


class Picky(TinyCNN):
    """Fails on 24x24 inputs at run time only (the meta-device check lets it through)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.device.type != "meta" and x.shape[-1] == 24:
            raise ValueError("24 is not supported")
        return super().forward(x)


def picky() -> nn.Module:
    return Picky()


class WeightProbe(nn.Module):
    """Records the sum of its weights at every forward pass (class-level, as the model is built by name): what
    state each training step started from."""

    seen: list[float] = []

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(3 * 8 * 8, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        WeightProbe.seen.append(float(self.fc.weight.detach().sum()))
        return self.fc(torch.flatten(x, 1))


def weight_probe() -> nn.Module:
    WeightProbe.seen = []
    return WeightProbe()


class _DriftingBackward(torch.autograd.Function):
    """Identity forward; a backward whose result drifts by a hair from call to call, as the atomics of a
    GPU's scatter or weight-gradient kernels do (the CPU has no such kernel to show it)."""

    calls = 0

    @staticmethod
    def forward(ctx, x):
        return x.clone()

    @staticmethod
    def backward(ctx, grad):
        _DriftingBackward.calls += 1
        return grad * (1.0 + 1e-6 * _DriftingBackward.calls)


class DriftingBackwardNet(nn.Module):
    """A forward pass that repeats bit for bit, and a training step whose gradients do not (in `conv`, which
    sits before the drifting op; `fc`, after it, gets the same gradients every time)."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.fc = nn.Linear(4, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = _DriftingBackward.apply(torch.relu(self.conv(x)))
        return self.fc(x.mean(dim=(2, 3)))


def drifting_backward() -> nn.Module:
    return DriftingBackwardNet()


class DepthwiseNet(nn.Module):
    """A dense convolution, a depthwise (grouped) one and a classifier: a grouped convolution's backward is
    where a FLOP formula that ignores groups overcounts."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 16, 3, padding=1)
        self.depthwise = nn.Conv2d(16, 16, 3, padding=1, groups=16)
        self.fc = nn.Linear(16, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(self.depthwise(self.conv(x)).mean(dim=(2, 3)))


def depthwise_net() -> nn.Module:
    return DepthwiseNet()


class TwoInputs(nn.Module):
    """Takes an image and a vector positionally: its factory says so with example_inputs returning a tuple."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.fc = nn.Linear(4 + 5, 3)

    def forward(self, image: torch.Tensor, extra: torch.Tensor) -> torch.Tensor:
        pooled = torch.flatten(nn.functional.adaptive_avg_pool2d(self.conv(image), 1), 1)
        return self.fc(torch.cat([pooled, extra], dim=1))


def two_inputs() -> nn.Module:
    return TwoInputs()


def _two_examples(batch, device, dtype):
    return (torch.randn(batch, 3, 8, 8, device=device, dtype=dtype), torch.randn(batch, 5, device=device, dtype=dtype))


two_inputs.example_inputs = _two_examples


class KeywordInputs(nn.Module):
    """Takes token ids and a mask by keyword and returns a dict (the shape of a transformers model's call)."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(50, 8)
        self.head = nn.Linear(8, 50)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> dict:
        hidden = self.embed(input_ids) * attention_mask.unsqueeze(-1)
        return {"logits": self.head(hidden), "hidden": (hidden,)}


def keyword_inputs() -> nn.Module:
    return KeywordInputs()


def _keyword_examples(batch, device, dtype):
    ids = torch.randint(0, 50, (batch, 12), device=device)
    return {"input_ids": ids, "attention_mask": torch.ones_like(ids)}


keyword_inputs.example_inputs = _keyword_examples


def bad_examples() -> nn.Module:
    return TinyCNN()


bad_examples.example_inputs = lambda batch, device, dtype: [1, 2]


def failing_examples() -> nn.Module:
    return TinyCNN()


def _fail(batch, device, dtype):
    raise RuntimeError("no data here")


failing_examples.example_inputs = _fail


class QuantMLP(nn.Module):
    """Two Linear layers a quantization scheme converts and a head too small for it (4 outputs), on a (batch, 32)
    input."""

    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 32))
        self.head = nn.Linear(32, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(torch.relu(self.body(x)))


def quant_mlp() -> nn.Module:
    return QuantMLP()


class SlowElementwise(nn.Module):
    """A layer written slowly: a scale applied one element at a time, in a Python loop (what a vectorised multiply
    does in one op). Per element, not per column: under two CPU burners a pass's stalls outside the layers made a
    per-column loop (256 ops at batch 8) less than a tenth of the pass, and `why` named no slow layer."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.stack([value * 0.5 for value in x.flatten().unbind(0)]).view_as(x)


class SlowLayerNet(nn.Module):
    """Three Linear layers and, between two of them, a layer written slowly: `why` names it with its share."""

    def __init__(self) -> None:
        super().__init__()
        self.inp = nn.Linear(64, 256)
        self.scale = SlowElementwise()
        self.mid = nn.Linear(256, 256)
        self.out = nn.Linear(256, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(torch.relu(self.mid(self.scale(torch.relu(self.inp(x))))))


def slow_layer_net() -> nn.Module:
    return SlowLayerNet()


class WideMLP(nn.Module):
    """GEMMs big enough that a second thread divides them (on a (batch, 512) input): `why` on one thread finds it."""

    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Linear(512, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU(),
                                  nn.Linear(1024, 512))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.body(x)


def wide_mlp() -> nn.Module:
    return WideMLP()
