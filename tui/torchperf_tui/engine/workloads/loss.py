"""The loss a training step takes of a model's output, fitted to the model: a causal language model's next-token
cross-entropy, a classifier's cross-entropy against labels, else the sum of its floating outputs. Part of the
workload: the FLOP counter counts its backward on the meta device, the training step times it."""

from __future__ import annotations

from torchperf_tui.core.errors import TorchperfError
from torchperf_tui.engine.hardware.lazy_torch import torch
from torchperf_tui.engine.workloads.model_inputs import ModelInputs

# What each loss is, as a result says it.
LOSS_CROSS_ENTROPY = "cross-entropy against seeded random labels"
LOSS_SUM = "sum of the outputs"
LOSS_NEXT_TOKEN = "next-token cross-entropy with the input ids as labels"


def training_loss(output, labels_for, inputs: ModelInputs | None = None) -> tuple[torch.Tensor, str]:
    """(loss, what it is): a causal language model's next-token cross-entropy with its input ids as the labels
    (its logits (batch, length, vocabulary) beside `input_ids` (batch, length)); cross-entropy against
    `labels_for(batch, classes)` for a (batch, classes) output; else the sum of every floating output tensor
    (detection and segmentation models return dicts and tuples, transformers a ModelOutput)."""
    ids = inputs.kwargs.get("input_ids") if inputs is not None else None
    logits = output.get("logits") if isinstance(output, dict) else None
    if (ids is not None and isinstance(logits, torch.Tensor) and logits.dim() == 3
            and tuple(logits.shape[:2]) == tuple(ids.shape) and ids.shape[1] > 1):
        shifted = logits[:, :-1].reshape(-1, logits.shape[-1]).float()
        return torch.nn.functional.cross_entropy(shifted, ids[:, 1:].reshape(-1)), LOSS_NEXT_TOKEN
    if isinstance(output, torch.Tensor) and output.dim() == 2 and output.shape[1] > 1:
        return torch.nn.functional.cross_entropy(output.float(), labels_for(*output.shape)), LOSS_CROSS_ENTROPY
    tensors = [t for t in output_tensors(output) if t.is_floating_point()]
    if not tensors:
        raise TorchperfError("a training step needs a floating-point output to take a loss of: "
                             f"the model returned {type(output).__name__}")
    return sum(t.float().sum() for t in tensors), LOSS_SUM


def output_tensors(output):
    """Every tensor of a model's output, walking its dicts (a transformers ModelOutput is one), lists and tuples."""
    if isinstance(output, torch.Tensor):
        yield output
    elif isinstance(output, dict):
        for value in output.values():
            yield from output_tensors(value)
    elif isinstance(output, (list, tuple)):
        for value in output:
            yield from output_tensors(value)
