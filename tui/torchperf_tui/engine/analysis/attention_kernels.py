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


def attention_by_site(events: Any, iters: int, on_cuda: bool) -> dict[tuple[str, str], dict]:
    """(site, pass) -> {"ran": family, "kernels": {name: [us, calls]}} from a profile whose attention sites ran in
    LAYER_PREFIX ranges; the backward found by the autograd sequence numbers of the ops under each SDPA call."""
    found: dict[tuple[str, str], dict] = {}
    backward_of: dict[tuple[Any, int], str] = {}
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
        for op in (op for op in descendants(event) if str(op.name) == SDPA_OP):
            inner = descendants(op)
            impl = next((c for c in op.cpu_children if family(str(c.name))), None)
            for child in inner:
                if getattr(child, "sequence_nr", -1) is not None and getattr(child, "sequence_nr", -1) >= 0:
                    backward_of[(getattr(child, "thread", None), child.sequence_nr)] = site
            if on_cuda:
                kernels = [(str(k.name), float(k.duration)) for c in [op, *inner] for k in getattr(c, "kernels", []) or []]
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
        ran = family(node) or "math"  # only math decomposes into nodes of its own (bmm, softmax, ...)
        if on_cuda:
            kernels = [(str(k.name), float(k.duration)) for c in descendants(event) for k in getattr(c, "kernels", []) or []]
        else:
            kernels = [(node, float(event.cpu_time_total))]
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
