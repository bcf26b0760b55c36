"""FLOP formulas the counter lacks or gets wrong, and the watch on attention calls: a convolution's backward (PyTorch's
own counts a depthwise one's input gradient as dense), the fused SDPA ops FlopCounterMode has no formula for, and
AttentionWatch, which notes each F.scaled_dot_product_attention call of a forward (engine/workloads/complexity.py).
"""

from __future__ import annotations

import torch
from torch.nn import functional as F
from torch.overrides import TorchFunctionMode
from torch.utils.flop_counter import flop_registry

from torchperf_tui.engine.workloads.complexity_result import AttentionCount


def conv_backward_flops(grad_out_shape, x_shape, w_shape, _bias, _stride, _padding, _dilation, transposed,
                         _output_padding, _groups, output_mask, out_shape=None, **_) -> int:
    """A convolution's backward: the input's and the weight's gradients each cost what the forward did.
    PyTorch's own formula counts a grouped (depthwise) convolution's input gradient as if it were dense
    (mobilenet_v3_small's backward came out 24x its forward)."""
    from torch.utils.flop_counter import conv_flop_count

    forward = conv_flop_count(list(x_shape), list(w_shape), list(grad_out_shape), transposed=transposed)
    return forward * (int(bool(output_mask[0])) + int(bool(output_mask[1])))


def _attention_dims(query_shape, key_shape, value_shape) -> tuple[int, int, int]:
    """(batch x query heads x L x S: the scores, E: the query's depth, Ev: the value's depth) of an SDPA call."""
    *lead, heads, length, depth = query_shape
    scores = heads * length * key_shape[-2]
    for n in lead:
        scores *= n
    return scores, depth, value_shape[-1]


def attention_flops(query_shape, key_shape, value_shape, *_, out_shape=None, **__) -> int:
    """An SDPA forward: QK^T (L x S scores of depth E) and AV (depth Ev) for each batch and query head; key and value
    heads may be fewer (grouped-query attention), each serves several query heads."""
    scores, depth, value_depth = _attention_dims(query_shape, key_shape, value_shape)
    return 2 * scores * (depth + value_depth)


def attention_backward_flops(grad_out_shape, query_shape, key_shape, value_shape, *_, out_shape=None, **__) -> int:
    """A fused SDPA backward: the scores computed again, then the gradients of the scores, V, Q and K (as PyTorch's
    own formula for the flash/efficient/cuDNN backward)."""
    scores, depth, value_depth = _attention_dims(query_shape, key_shape, value_shape)
    return 2 * scores * (3 * depth + 2 * value_depth)


def _sdpa_formulas() -> dict:
    """Fused SDPA ops FlopCounterMode has no formula for (they would count 0): the CPU flash kernel and the
    `overrideable` one of out-of-tree backends. Missing ops (an older torch) are left out."""
    pairs = (("_scaled_dot_product_flash_attention_for_cpu", attention_flops),
             ("_scaled_dot_product_flash_attention_for_cpu_backward", attention_backward_flops),
             ("_scaled_dot_product_fused_attention_overrideable", attention_flops),
             ("_scaled_dot_product_fused_attention_overrideable_backward", attention_backward_flops))
    formulas = {}
    for name, formula in pairs:
        op = getattr(torch.ops.aten, name, None)
        if op is not None and op not in flop_registry:
            formulas[op] = formula
    return formulas


SDPA_FORMULAS = _sdpa_formulas()


class AttentionWatch(TorchFunctionMode):
    """Notes each F.scaled_dot_product_attention call of the forward: how many, their FLOPs (the full L x S scores,
    as the math kernel that runs on meta computes them), and how many were causal or masked."""

    def __init__(self) -> None:
        super().__init__()
        self.calls = self.flops = self.causal = self.masked = 0

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func is F.scaled_dot_product_attention and len(args) >= 3:
            query, key, value = args[:3]
            mask = args[3] if len(args) > 3 else kwargs.get("attn_mask")
            is_causal = args[5] if len(args) > 5 else kwargs.get("is_causal", False)
            self.calls += 1
            self.flops += attention_flops(query.shape, key.shape, value.shape)
            self.causal += bool(is_causal)
            self.masked += mask is not None
        return func(*args, **kwargs)

    def result(self) -> AttentionCount | None:
        if not self.calls:
            return None
        return AttentionCount(calls=self.calls, flops=self.flops, causal_calls=self.causal, masked_calls=self.masked)
