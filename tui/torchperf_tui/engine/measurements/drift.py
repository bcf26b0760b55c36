"""How far a run's outputs move from the float32 model's on the same input: its drift.

A run that changes numerics (a quantization scheme, a half-precision dtype, mixed precision, TF32 or a lower matmul
precision) takes, once and untimed, the output of the same weights in float32 at full precision (TF32 off, matmul
precision highest) before the model is cast and quantized, then its own output under its own settings, and says
how far apart they are: the signal-to-quantization-noise ratio (SQNR, dB), the largest absolute error, and for
outputs that end in scores (a classifier's classes, a language model's vocabulary) the share of positions whose
arg-max changed. An A/B says B's drift against A's outputs too.

Loads without torch: the app's UI process unpickles a result's Drift.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

from torchperf_tui.engine.hardware.lazy_torch import torch
from torchperf_tui.engine.measurements.flags import Flags, applied_flags, flag_applicability
from torchperf_tui.engine.workloads.loss import output_tensors

# What a run's drift is measured against.
FLOAT32 = "the float32 model at full precision"


@dataclass(frozen=True)
class Drift:
    """How far outputs moved from a reference's (`against`). `sqnr_db`: 10·log10(Σref² / Σ(out−ref)²), None when
    the outputs are identical (no noise); `max_abs_error`: the largest |out − ref|; `argmax_changed`: the share of
    `positions` (every row of scores) whose arg-max differs, None for outputs that are not scores. `finite`: False
    when the output (or the reference) holds a NaN or an infinity, and then the figures are not read."""

    against: str
    sqnr_db: float | None
    max_abs_error: float
    argmax_changed: float | None
    positions: int | None
    finite: bool = True
    outputs: str = "outputs"  # what was compared: "logits" or "outputs"

    def to_dict(self) -> dict:
        return asdict(self)


def changes_numerics(run, device_type: str) -> bool:
    """Whether `run` (a BenchConfig) computes anything differently from the float32 model at full precision: a
    quantization scheme, a dtype other than float32, mixed precision, a matmul precision below highest, or a TF32
    flag on where it acts (on CUDA from compute capability 8.0: PyTorch's own default lets cuDNN's convolutions use
    TF32 there, so a default float32 run of a CNN on such a GPU changes numerics too)."""
    if run.quant is not None or run.dtype not in ("float32", "fp32") or run.amp is not None:
        return True
    flags = run.flags.resolved()
    if flags.matmul_precision != "highest":
        return True
    return any(getattr(flags, name) and flag_applicability(name, device_type)[0] for name in tf32_flags())


def tf32_flags() -> tuple[str, ...]:
    """The flags that allow TF32 (each backend's)."""
    return tuple(name for name in Flags().to_dict() if name.startswith("tf32"))


def full_precision() -> Flags:
    """The flags of the reference: PyTorch's defaults with every TF32 flag off and matmul precision highest."""
    return Flags().replace(matmul_precision="highest", **{name: False for name in tf32_flags()})


def scored(output):
    """The tensor of `output` that a drift compares, and what it is called: a language model's or a classifier's
    logits where the output has them, else every floating tensor of it flattened into one."""
    logits = output.get("logits") if isinstance(output, dict) else None
    if isinstance(logits, torch.Tensor):
        return logits.detach().float(), "logits"
    if isinstance(output, torch.Tensor):
        return (output.detach().float() if output.is_floating_point() else None), "outputs"
    tensors = [t.detach().float().reshape(-1) for t in output_tensors(output) if t.is_floating_point()]
    return (torch.cat(tensors) if tensors else None), "outputs"


def forward_output(model, x, amp: str | None, device_type: str):
    """One untimed forward pass of `model` on `x` (its ModelInputs) without gradients, under mixed precision
    `amp` where given: (the compared tensor on the CPU in float32, what it is)."""
    with torch.no_grad():
        if amp is not None:
            with torch.autocast(device_type=device_type, dtype=torch.float16 if amp == "fp16" else torch.bfloat16):
                output = x.call(model)
        else:
            output = x.call(model)
    tensor, what = scored(output)
    return (tensor.cpu() if tensor is not None else None), what


class Reference:
    """The float32 output a run's drift is measured against: `take` is the `before_cast` hook of
    engine/workloads/workload.prepare_workload (the same weights, before the cast and the quantization)."""

    def __init__(self, device_type: str) -> None:
        self.device_type = device_type
        self.output = None
        self.what = "outputs"

    def take(self, model, x) -> None:
        with applied_flags(full_precision()):
            self.output, self.what = forward_output(model, x, None, self.device_type)

    def drift_of(self, output) -> Drift | None:
        """The drift of `output` (forward_output's tensor) from this reference; None where either has no floating
        output to compare."""
        return drift_between(self.output, output, FLOAT32, self.what)


def drift_between(reference, output, against: str, what: str = "outputs") -> Drift | None:
    """The drift of tensor `output` from tensor `reference` (same shape, CPU float32); None where either is None or
    their shapes differ."""
    if reference is None or output is None or tuple(reference.shape) != tuple(output.shape):
        return None
    finite = bool(torch.isfinite(reference).all()) and bool(torch.isfinite(output).all())
    if not finite:
        return Drift(against=against, sqnr_db=None, max_abs_error=math.nan, argmax_changed=None, positions=None,
                     finite=False, outputs=what)
    ref, out = reference.double(), output.double()
    noise = float((out - ref).pow(2).sum())
    signal = float(ref.pow(2).sum())
    sqnr = None if noise == 0.0 else (10.0 * math.log10(signal / noise) if signal > 0 else -math.inf)
    max_error = float((out - ref).abs().max()) if ref.numel() else 0.0
    changed, positions = None, None
    if ref.dim() >= 2 and ref.shape[-1] > 1:  # scores: a row per position, a column per class or token
        rows_ref, rows_out = ref.reshape(-1, ref.shape[-1]), out.reshape(-1, out.shape[-1])
        positions = int(rows_ref.shape[0])
        changed = float((rows_ref.argmax(-1) != rows_out.argmax(-1)).double().mean()) if positions else None
    return Drift(against=against, sqnr_db=sqnr, max_abs_error=max_error, argmax_changed=changed,
                 positions=positions, outputs=what)
