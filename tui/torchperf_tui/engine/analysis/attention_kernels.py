"""Which attention kernel ran at each call site, beside the backends that were allowed, and why a preferred one
did not: the attention half of `compare --kernels` (engine/analysis/kernels.py).

`flash_sdp_enabled()` says what a switch allows, not what runs. What runs is in the profiler's ops: under
`aten::scaled_dot_product_attention` the op of the kernel torch chose (`aten::_scaled_dot_product_flash_attention
_for_cpu` on the CPU, `..._flash_attention`, `..._efficient_attention`, `..._cudnn_attention` on CUDA, or the math
decomposition `aten::_scaled_dot_product_attention_math`: bmm, softmax, bmm, which builds the full S x S scores).
A training step's backward is the autograd node of that op (`ScaledDotProductFlashAttentionForCpuBackward0`...),
or for math the nodes of its bmm and softmax, found by the autograd sequence number as kernels.py finds a conv's.
Why a preferred backend did not run is found by running each recorded call again under it
(engine/measurements/attention_calls.py, which also refuses a set that leaves a call no backend before a run).
"""

from __future__ import annotations

import re
from typing import Any

from torchperf_tui.engine.analysis.attention_result import AttentionRun
from torchperf_tui.engine.analysis.kernel_time import KernelTime
from torchperf_tui.core.attention_settings import sdpa_backends
from torchperf_tui.engine.workloads.layer_ranges import BACKWARD_PREFIX, LAYER_PREFIX, descendants, on_cpu

SDPA_OP = "aten::scaled_dot_product_attention"
# The op under SDPA_OP (or the autograd node of a training step's backward) -> the kernel family that ran.
_FAMILY_OPS = (("flash", re.compile(r"(?i)flash_?attention")), ("efficient", re.compile(r"(?i)efficient_?attention")),
               ("cudnn", re.compile(r"(?i)cudnn_?attention")), ("math", re.compile(r"(?i)attention_math")))
# -- what ran, from the profiler's events ------------------------------------------------------------------------

def family(name: str) -> str | None:
    """'flash', 'efficient', 'cudnn' or 'math' for an SDPA implementation op or its backward node; None else."""
    for kind, pattern in _FAMILY_OPS:
        if pattern.search(name):
            return kind
    return None


# The ops of an attention that is not SDPA's, directly under its module: eager's two matmuls (what lies between them,
# the scale, the mask, softmax and dropout, is its attention too), flex_attention's compiled region with its guard
# lookup, flash-attn's own ops.
_OTHER_ATTENTION_OPS = re.compile(r"aten::(matmul|bmm|baddbmm|einsum)$|flex_attention|flash_attn|"
                                  r"Torch-Compiled Region|TorchDynamo Cache Lookup")


def implementation_of(model: Any) -> str | None:
    """The attention implementation a transformers model runs ('sdpa', 'eager', 'flex_attention', ...), from the
    config of the first module that has one; None for another model (its attention, if any, is found by its SDPA
    calls)."""
    for module in model.modules():
        config = getattr(module, "config", None)
        implementation = getattr(config, "_attn_implementation", None)
        if isinstance(implementation, str):
            return implementation
    return None


def attention_modules(model: Any) -> list[str]:
    """The attention modules of a transformers model, by transformers' class names (LlamaAttention,
    BertSelfAttention): the innermost where one holds another, the module an SDPA call site would be."""
    named = [(name, type(module).__name__) for name, module in model.named_modules() if name]
    attention = [name for name, kind in named if kind.endswith("Attention")]
    return [name for name in attention if not any(other.startswith(name + ".") for other in attention)]


def _other_attention_span(site_event: Any) -> list[Any]:
    """The ops of a non-SDPA attention directly under its site's range: from its first attention op to its last
    (the projections before and after are not attention, nor the rotary embedding before the first matmul)."""
    ops = [c for c in getattr(site_event, "cpu_children", []) or [] if not str(c.name).startswith(LAYER_PREFIX)]
    marks = [i for i, op in enumerate(ops) if _OTHER_ATTENTION_OPS.search(str(op.name))]
    return ops[marks[0]:marks[-1] + 1] if marks else []


def _device_kernels(events: Any) -> list[tuple[str, float]]:
    """(name, us) of every device kernel the events launched."""
    return [(str(k.name), float(k.duration)) for event in events for k in getattr(event, "kernels", []) or []]


def _forward_of(ops: Any, site: str, backward_of: dict[tuple[Any, int], str]) -> None:
    """Each op's autograd sequence number goes to `site`: the backward nodes of that number are the site's."""
    for op in ops:
        number = getattr(op, "sequence_nr", -1)
        if number is not None and number >= 0:
            backward_of[(getattr(op, "thread", None), number)] = site


def attention_by_site(events: Any, iters: int, on_cuda: bool,
                      implementation: str | None = None) -> dict[tuple[str, str], dict]:
    """(site, pass) -> {"ran": family, "kernels": {name: [us, calls]}} from a profile whose attention sites ran in
    LAYER_PREFIX ranges; the backward found by the autograd sequence numbers of the ops under each SDPA call. A site
    with no SDPA call under it, in a model whose `implementation` is another (eager, flex_attention), ran that: its
    ops from its first attention op to its last (_other_attention_span)."""
    found: dict[tuple[str, str], dict] = {}
    backward_of: dict[tuple[Any, int], str] = {}
    other = implementation if implementation not in (None, "sdpa") else None
    ran_at: dict[str, str] = {}  # a site of the other implementation -> its name, for its backward
    ordered = sorted(events, key=lambda e: e.time_range.start)

    def add(site: str, phase: str, ran: str | None, kernels: list[tuple[str, float]]) -> None:
        entry = found.setdefault((site, phase), {"ran": set(), "kernels": {}})
        if ran:
            entry["ran"].add(ran)
        for name, us in kernels:
            slot = entry["kernels"].setdefault(name, [0.0, 0])
            slot[0] += us
            slot[1] += 1

    for event in ordered:
        if not (str(event.name).startswith(LAYER_PREFIX) and on_cpu(event)):
            continue
        site = str(event.name)[len(LAYER_PREFIX):]
        sdpa = [op for op in descendants(event) if str(op.name) == SDPA_OP]
        if not sdpa and other is not None:
            span = _other_attention_span(event)
            spanned = [child for op in span for child in [op, *descendants(op)]]
            _forward_of(spanned, site, backward_of)
            if on_cuda:
                kernels = _device_kernels(spanned)
            else:
                kernels = [(str(op.name), float(op.cpu_time_total)) for op in span]
            ran_at[site] = other
            add(site, "fwd", other, kernels)
        for op in sdpa:
            inner = descendants(op)
            impl = next((c for c in op.cpu_children if family(str(c.name))), None)
            _forward_of(inner, site, backward_of)
            if on_cuda:
                kernels = _device_kernels([op, *inner])
            else:
                kernels = [(str(impl.name if impl is not None else op.name), float(op.cpu_time_total))]
            add(site, "fwd", family(str(impl.name)) if impl is not None else None, kernels)
    for event in ordered:
        if not (str(event.name).startswith(BACKWARD_PREFIX) and on_cpu(event)):
            continue
        site = backward_of.get((getattr(event, "fwd_thread", None), getattr(event, "sequence_nr", -1)))
        if site is None:
            continue
        node = str(event.name)[len(BACKWARD_PREFIX):]
        # only math decomposes into nodes of its own (bmm, softmax, ...), and another implementation's ops
        ran = ran_at.get(site) or family(node) or "math"
        kernels = _device_kernels(descendants(event)) if on_cuda else [(node, float(event.cpu_time_total))]
        add(site, "bwd", ran, kernels)
    n = max(iters, 1)
    return {key: {"ran": "+".join(sorted(entry["ran"])) if entry["ran"] else "",
                  "kernels": sorted((KernelTime(name, us / n, calls / n, key[1]) for name, (us, calls)
                                     in entry["kernels"].items()), key=lambda k: -k.us_per_iter)}
            for key, entry in found.items()}


def attention_run(allowed: str, entry: dict | None, reasons: dict[str, str | None]) -> AttentionRun:
    """An arm's run at a site in one pass: what ran, its kernels, and the allowed backends it passed over (with
    their reasons) where a probe found one could not take the site's calls."""
    if entry is None:
        return AttentionRun(allowed=allowed, ran="")
    kernels = entry["kernels"]
    ran = entry["ran"]
    passed = {b: why for b, why in reasons.items() if why and b in sdpa_backends(allowed) and b != ran}
    return AttentionRun(allowed=allowed, ran=ran, kernels=kernels, us_per_iter=sum(k.us_per_iter for k in kernels),
                        calls_per_iter=max((k.calls_per_iter for k in kernels), default=0.0), passed_over=passed)
