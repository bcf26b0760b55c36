"""What one timed iteration does: an inference pass, or a training step (forward, loss, backward, optimizer
step), either one optionally under mixed precision (torch.autocast, with a gradient scaler for fp16 training).

Mixed precision is not `--dtype`: the model keeps its float32 weights and autocast runs the ops that gain from
it in half precision. A training step's loss is one that fits the model: cross-entropy against seeded random
labels when the output is (batch, classes), else the sum of every output tensor; the result says which.
Gradients are set to None between steps, as `optimizer.zero_grad(set_to_none=True)` does in training code.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Any

from torchperf_tui.core.errors import TorchperfError
from torchperf_tui.core.run_option_table import run_option
from torchperf_tui.engine.hardware.lazy_torch import torch
from torchperf_tui.engine.workloads.model_inputs import ModelInputs
from torchperf_tui.engine.workloads.loss import training_loss

# --amp's value (core/run_option_table.py: the values it takes) -> the autocast dtype's name
AMP_DTYPES = {"fp16": "float16", "bf16": "bfloat16"}


@dataclass(frozen=True)
class StepSpec:
    """`step`: "infer" or "train"; `optimizer`: for a training step; `amp`: None, "fp16" or "bf16"."""

    step: str = "infer"
    optimizer: str = "sgd"
    amp: str | None = None

    def __post_init__(self) -> None:
        check_step(self.step)
        check_optimizer(self.optimizer)
        check_amp(self.amp)

    @property
    def training(self) -> bool:
        return self.step == "train"

    def describe(self) -> str:
        """'train (sgd) · amp bf16', 'infer': how a run's line and its record say it."""
        text = f"train ({self.optimizer})" if self.training else "infer"
        return text + (f" · amp {self.amp}" if self.amp else "")


def check_step(value: str) -> str:
    return run_option("step").choose(value)


def check_optimizer(value: str) -> str:
    return run_option("optimizer").choose(value)


def check_amp(value: str | None) -> str | None:
    if value is not None and value not in run_option("amp").choices:
        raise TorchperfError(f"unknown mixed precision {value!r}: choose {run_option('amp').choices_said()} (or "
                             "leave it off)")
    return value


def amp_problem(amp: str | None, device: torch.device, dtype: torch.dtype) -> str | None:
    """Why autocast `amp` cannot run here (None when it can): the device must have autocast, and autocast
    casts down from float32 weights (a model already cast with --dtype has nothing to gain)."""
    if amp is None:
        return None
    if dtype != torch.float32:
        return (f"mixed precision (--amp {amp}) runs float32 weights with half-precision ops: use --dtype "
                f"float32 with it (the model is {str(dtype).removeprefix('torch.')})")
    if not torch.amp.is_autocast_available(device.type):
        return f"torch.autocast is not available on {device.type} in this PyTorch build"
    if device.type == "cuda" and amp == "bf16" and not torch.cuda.is_bf16_supported():
        return f"{device} does not support bfloat16"
    return None


def grad_context(spec: StepSpec):
    """No autograd for an inference pass (torch.inference_mode); a training step needs it."""
    return contextlib.nullcontext() if spec.training else torch.inference_mode()


class StepRunner:
    """Calls one iteration on an input: `runner(x)`. For a training step it owns the optimizer and the
    gradient scaler, and sets the model to train mode (batch norm updates its statistics, dropout is on)."""

    def __init__(self, model: torch.nn.Module, spec: StepSpec, device: torch.device, seed: int = 0,
                 forward: Any = None) -> None:
        """`forward`: what runs the model (a compiled one), by default the model itself."""
        self.model, self.spec, self.device, self.seed = model, spec, device, seed
        self.forward = forward if forward is not None else model
        self.loss_kind: str | None = None  # said once the first output is seen
        self._labels: dict[tuple[int, int], torch.Tensor] = {}
        self.optimizer = self.scaler = None
        if spec.training:
            model.train()
            params = [p for p in model.parameters() if p.requires_grad]
            if not params:
                raise TorchperfError("a training step needs parameters that require gradients: this model has none")
            if spec.optimizer == "adamw":
                self.optimizer = torch.optim.AdamW(params, lr=1e-3)
            else:
                self.optimizer = torch.optim.SGD(params, lr=0.01, momentum=0.9)
            if spec.amp == "fp16":
                self.scaler = torch.amp.GradScaler(device.type)
        else:  # an inference pass after a training one on the same model (an A/B of the two) must not train
            model.eval()

    def forward_only_peak(self, x: ModelInputs) -> int | None:
        """CUDA: the caching allocator's peak over one forward pass without gradients, under this step's
        autocast, measured before the first training step (no gradients or optimizer state exist yet): the
        memory an inference pass needs, to set beside a training step's peak. The peak statistics are reset
        afterwards so the next reading is the training steps' own. None off CUDA (no allocator statistics)."""
        if self.device.type != "cuda":
            return None
        torch.cuda.synchronize(self.device)
        torch.cuda.reset_peak_memory_stats(self.device)
        with torch.no_grad(), self.autocast():
            x.call(self.forward)
        torch.cuda.synchronize(self.device)
        peak = int(torch.cuda.max_memory_allocated(self.device))
        torch.cuda.reset_peak_memory_stats(self.device)
        return peak

    def autocast(self):
        if self.spec.amp is None:
            return contextlib.nullcontext()
        return torch.autocast(self.device.type, dtype=getattr(torch, AMP_DTYPES[self.spec.amp]))

    def __call__(self, x: ModelInputs):
        if not self.spec.training:
            with self.autocast():
                return x.call(self.forward)
        with self.autocast():
            loss = self.loss(x.call(self.forward), x)
        if self.scaler is not None:
            self.scaler.scale(loss).backward()
            self.scaler.step(self.optimizer)
            self.scaler.update()
        else:
            loss.backward()
            self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        return loss

    def step_once(self, x: ModelInputs) -> dict[str, torch.Tensor]:
        """One training step, keeping what it computed for a determinism check: the loss, every parameter's
        gradient (before the optimizer used it) and every parameter after the step, as private copies."""
        with self.autocast():
            loss = self.loss(x.call(self.forward), x)
        (self.scaler.scale(loss) if self.scaler is not None else loss).backward()
        named = [(n, p) for n, p in self.model.named_parameters() if p.requires_grad]
        kept = {"loss": loss.detach().clone()}
        kept.update({f"grad {n}": p.grad.detach().clone() for n, p in named if p.grad is not None})
        if self.scaler is not None:
            self.scaler.step(self.optimizer)
            self.scaler.update()
        else:
            self.optimizer.step()
        kept.update({f"weight {n}": p.detach().clone() for n, p in named})
        self.optimizer.zero_grad(set_to_none=True)
        return kept

    def loss(self, output, inputs: ModelInputs | None = None) -> torch.Tensor:
        loss, self.loss_kind = training_loss(output, self._labels_for, inputs)
        return loss

    def _labels_for(self, batch: int, classes: int) -> torch.Tensor:
        key = (batch, classes)
        if key not in self._labels:
            gen = torch.Generator().manual_seed(self.seed)
            self._labels[key] = torch.randint(0, classes, (batch,), generator=gen).to(self.device)
        return self._labels[key]
