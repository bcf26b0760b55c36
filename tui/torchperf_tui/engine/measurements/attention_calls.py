"""The SDPA calls of a model and which backends can take them: each F.scaled_dot_product_attention call is recorded (a
TorchFunctionMode: its module, shapes, strides, dtype, mask, dropout, causal flag) and run again under each allowed
fused backend alone, on the device, with torch's warnings caught: a backend that cannot take the call raises "No
available kernel" and its warnings say why (dropout, a mask, a head size, a dtype). A set none of whose backends
can take a call is refused in one line; `check_attention_sets` does that before a run (BenchConfig.prepare),
recording the calls from a forward on the meta device (no weights) and running each distinct call once on the real
device. What actually ran is read from the profiler by engine/analysis/attention_kernels.py.
"""

from __future__ import annotations

import re
import warnings
from dataclasses import dataclass
from typing import Any, Callable

from torchperf_tui.core.errors import FlagError
from torchperf_tui.core.formatting import format_shape
from torchperf_tui.engine.hardware.lazy_torch import torch
from torchperf_tui.core.attention_settings import CPU_SDPA_BACKENDS, SDPA_LABELS, sdpa_backends
from torchperf_tui.engine.measurements import attention_flags as attn
from torchperf_tui.engine.workloads.layer_ranges import wrap_forwards
from torchperf_tui.engine.workloads.workload import PASSTHROUGH_CODE
from torchperf_tui.engine.hardware.device_choice import resolve_device
from torchperf_tui.engine.workloads.complexity import analysis_lock, meta_inputs, meta_weights
from torchperf_tui.engine.workloads.inputs import parse_dtype
from torchperf_tui.engine.workloads.models import build_model

# torch's reasons, as its warnings word them, in a few words; the first that matches is said.
_REASONS = (
    (re.compile(r"(?i)dropout"), "dropout"),
    (re.compile(r"(?i)attn_mask|attention mask|mask"), "a mask"),
    (re.compile(r"(?i)head_?dim|head dimension|last dimension.*(size|multiple)|embed"), "a head size"),
    (re.compile(r"(?i)dtype|fp16|bf16|float16|bfloat16|float32|half"), "a dtype"),
    (re.compile(r"(?i)stride"), "a strided (non-contiguous) input"),
    (re.compile(r"(?i)sm\d+|compute capability|architecture|gpu"), "this GPU"),
    (re.compile(r"(?i)nested"), "a nested tensor"),
    (re.compile(r"(?i)gqa|grouped"), "grouped-query attention"),
    (re.compile(r"(?i)requires_grad|backward"), "its backward"),
    (re.compile(r"(?i)sequence length|seq_len"), "a sequence length"),
    (re.compile(r"(?i)disabled|not enabled|turned off"), "turned off"),
)


@dataclass(frozen=True)
class TensorShape:
    shape: tuple[int, ...]
    stride: tuple[int, ...]
    dtype: str

    @classmethod
    def of(cls, t) -> "TensorShape":
        return cls(tuple(t.shape), tuple(t.stride()), str(t.dtype).removeprefix("torch."))

    def make(self, device, dtype: str | None = None, requires_grad: bool = False):
        """A tensor of this shape and these strides on `device` (a bool one all True, a float one random)."""
        size = 1 + sum((n - 1) * s for n, s in zip(self.shape, self.stride) if n > 0) if all(self.shape) else 0
        kind = getattr(torch, dtype or self.dtype)
        base = (torch.ones(size, dtype=kind, device=device) if kind == torch.bool
                else torch.randn(size, device=device).to(kind) if kind.is_floating_point
                else torch.zeros(size, dtype=kind, device=device))
        out = base.as_strided(self.shape, self.stride)
        return out.requires_grad_(True) if requires_grad and kind.is_floating_point else out


@dataclass(frozen=True)
class AttentionCall:
    """One F.scaled_dot_product_attention call as the model made it: what decides which backend can take it."""

    site: str  # the innermost module whose forward made the call, e.g. model.layers.0.self_attn
    q: TensorShape
    k: TensorShape
    v: TensorShape
    mask: TensorShape | None
    dropout_p: float
    is_causal: bool
    enable_gqa: bool
    requires_grad: bool
    compute_dtype: str  # the dtype the kernel sees (autocast's where it casts)

    def signature(self) -> tuple:
        return (self.q, self.k, self.v, self.mask, self.dropout_p, self.is_causal, self.enable_gqa,
                self.requires_grad, self.compute_dtype)

    def describe(self) -> str:
        """'float32 q 1x4x1024x16, causal, dropout 0.1, a bool mask'."""
        parts = [f"{self.compute_dtype} q {format_shape(tuple(self.q.shape))}"] + (["causal"] if self.is_causal else []) + (
            [f"dropout {self.dropout_p:g}"] if self.dropout_p else []) + (
            [f"a {self.mask.dtype} mask"] if self.mask is not None else [])
        return ", ".join(parts)


class _CallRecorder(torch.overrides.TorchFunctionMode):
    """Records every F.scaled_dot_product_attention call with the module whose forward made it."""

    def __init__(self, stack: list[str], autocast_dtype: str | None) -> None:
        super().__init__()
        self.stack, self.autocast_dtype = stack, autocast_dtype
        self.calls: list[AttentionCall] = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func is torch.nn.functional.scaled_dot_product_attention:
            self.calls.append(_call_of(self.stack[-1] if self.stack else "(model)", args, kwargs, self.autocast_dtype))
        return func(*args, **kwargs)


PASSTHROUGH_CODE.add(_CallRecorder.__torch_function__.__code__)  # the model's errors stay the model's


def _call_of(site: str, args: tuple, kwargs: dict, autocast_dtype: str | None) -> AttentionCall:
    names = ("query", "key", "value", "attn_mask", "dropout_p", "is_causal", "scale", "enable_gqa")
    given = {**dict(zip(names, args)), **kwargs}
    q, k, v, mask = given["query"], given["key"], given["value"], given.get("attn_mask")
    dtype = str(q.dtype).removeprefix("torch.")
    if autocast_dtype is None and torch.is_autocast_enabled(q.device.type if q.device.type != "meta" else "cpu"):
        autocast_dtype = str(torch.get_autocast_dtype(q.device.type)).removeprefix("torch.")
    return AttentionCall(site=site, q=TensorShape.of(q), k=TensorShape.of(k), v=TensorShape.of(v),
                         mask=TensorShape.of(mask) if isinstance(mask, torch.Tensor) else None,
                         dropout_p=float(given.get("dropout_p") or 0.0), is_causal=bool(given.get("is_causal")),
                         enable_gqa=bool(given.get("enable_gqa")),
                         requires_grad=torch.is_grad_enabled() and any(t.requires_grad for t in (q, k, v)),
                         compute_dtype=autocast_dtype if autocast_dtype and q.is_floating_point() else dtype)


def record_calls(model, run: Callable[[], Any], autocast_dtype: str | None = None) -> list[AttentionCall]:
    """The SDPA calls of `run()` (a pass of `model`), in order, each with the innermost module that made it."""
    stack: list[str] = []
    named = [(name, module) for name, module in model.named_modules() if name]
    handles = wrap_forwards(named, stack.append, lambda: stack.pop() if stack else None)
    recorder = _CallRecorder(stack, autocast_dtype)
    try:
        with recorder:
            run()
    finally:
        for handle in handles:
            handle.remove()
    return recorder.calls


def short_reason(texts: list[str], call: AttentionCall | None = None) -> str:
    """torch's warnings about a backend it could not use, in a few words ('dropout', 'a bool mask', 'a head size
    of 320', 'dtype float32'); torch's own first reason where none of the known ones matches."""
    said = [t for t in texts if t and "kernel not used because" not in t]
    for pattern, words in _REASONS:
        if any(pattern.search(t) for t in said):
            if call is not None and words == "a mask" and call.mask is not None:
                return f"a {call.mask.dtype} mask" if call.mask.dtype == "bool" else "a float mask"
            if call is not None and words == "a head size":
                return f"a head size of {call.q.shape[-1]}"
            if call is not None and words == "a dtype":
                return f"dtype {call.compute_dtype}"
            return words
    text = re.sub(r"\s*\(Triggered internally at .*", "", said[0]) if said else "no reason given"
    return text[:80]


# A backend's name -> its member of torch.nn.attention.SDPBackend.
_BACKEND_MEMBERS = {"flash": "FLASH_ATTENTION", "efficient": "EFFICIENT_ATTENTION", "cudnn": "CUDNN_ATTENTION",
                    "math": "MATH"}


def _call_tensors(call: AttentionCall, device, requires_grad: bool = False) -> tuple:
    """(q, k, v, mask) of the call's shapes, strides and dtypes on `device` (mask None where it had none)."""
    q, k, v = (t.make(device, call.compute_dtype, requires_grad) for t in (call.q, call.k, call.v))
    mask = None
    if call.mask is not None:
        mask = call.mask.make(device, call.compute_dtype if call.mask.dtype != "bool" else None)
    return q, k, v, mask


def probe(call: AttentionCall, backend: str, device) -> str | None:
    """Run `call` again under `backend` alone on `device`: None when the backend takes it, else why not."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    member = _BACKEND_MEMBERS[backend]
    if not hasattr(SDPBackend, member):
        return "not in this PyTorch build"
    if device.type == "cpu" and backend not in CPU_SDPA_BACKENDS:
        return "not on the CPU"
    grad = call.requires_grad
    q, k, v, mask = _call_tensors(call, device, grad)
    with warnings.catch_warnings(record=True) as caught, torch.set_grad_enabled(grad):
        warnings.simplefilter("always")
        try:
            with sdpa_kernel([getattr(SDPBackend, member)]):
                torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=call.dropout_p,
                                                                 is_causal=call.is_causal,
                                                                 **({"enable_gqa": True} if call.enable_gqa else {}))
        except RuntimeError as exc:
            return short_reason([str(w.message) for w in caught] + [str(exc)], call)
    return None


def call_ms(call: AttentionCall, backend: str, device, reps: int = 5) -> float | None:
    """The median time of `call` run alone under `backend` on `device`, in ms (a warm-up first; synchronised on a
    GPU); None when the backend cannot take it."""
    import statistics
    import time

    from torch.nn.attention import SDPBackend, sdpa_kernel

    if probe(call, backend, device) is not None:
        return None
    q, k, v, mask = _call_tensors(call, device)
    options = {"enable_gqa": True} if call.enable_gqa else {}
    times = []
    with torch.no_grad(), sdpa_kernel([getattr(SDPBackend, _BACKEND_MEMBERS[backend])]):
        for rep in range(reps + 1):  # the first is the warm-up
            if device.type == "cuda":
                torch.cuda.synchronize(device)
            started = time.perf_counter()
            torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=0.0,
                                                             is_causal=call.is_causal, **options)
            if device.type == "cuda":
                torch.cuda.synchronize(device)
            if rep:
                times.append((time.perf_counter() - started) * 1000.0)
    return statistics.median(times)


def probe_sites(calls: list[AttentionCall], backends: tuple[str, ...], device) -> dict[str, dict[str, str | None]]:
    """Site -> {backend: why it cannot take the site's calls (None: it can)} for each fused backend of
    `backends` that exists on the device; each distinct call is run once per backend."""
    seen: dict[tuple, dict[str, str | None]] = {}
    out: dict[str, dict[str, str | None]] = {}
    for call in calls:
        key = call.signature()
        if key not in seen:
            seen[key] = {b: probe(call, b, device) for b in backends
                         if b != "math" and (device.type == "cuda" or b in CPU_SDPA_BACKENDS)}
        site = out.setdefault(call.site, {})
        for backend, why in seen[key].items():
            site[backend] = site.get(backend) or why
    return out


def unviable(calls: list[AttentionCall], sdpa: str, device) -> str | None:
    """One line when some call has no backend in `sdpa` that can take it on `device`, naming the call, the
    backends and torch's reasons; None when every call has one (math always can)."""
    backends = sdpa_backends(sdpa)
    if "math" in backends:
        return None
    tried: dict[tuple, str | None] = {}
    for call in calls:
        if call.signature() in tried:
            continue
        reasons = {b: probe(call, b, device) for b in backends}
        tried[call.signature()] = None
        if all(reasons.values()):
            why = "; ".join(f"{SDPA_LABELS[b]}: {r}" for b, r in reasons.items())
            return (f"sdpa={sdpa} leaves the attention at {call.site} ({call.describe()}) no backend on "
                    f"{device.type}: {why} (checked by running that call under the set); allow math")
    return None


def check_attention_sets(cfg, flag_sets, device=None) -> None:
    """Refuse, in one line and before anything runs, a flag set whose SDPA backends leave the model's attention
    none on its device: first by the documented constraints (no model needed), then, for a set without math, by
    running each distinct SDPA call of the model (recorded from a forward on the meta device) under the set."""
    device = device if device is not None else resolve_device(cfg.device)
    sets = [flags.sdpa for flags in flag_sets]
    for sdpa in dict.fromkeys(sets):
        refusal = attn.sdpa_refusal(sdpa, device.type, cfg.dtype, cfg.amp)
        if refusal:
            raise FlagError(refusal)
    restricted = [s for s in dict.fromkeys(sets) if "math" not in sdpa_backends(s)]
    if not restricted or not isinstance(cfg.model, str):
        return
    calls = meta_calls(cfg)
    for sdpa in restricted:
        line = unviable(calls, sdpa, device)
        if line:
            raise FlagError(line)


def meta_calls(cfg) -> list[AttentionCall]:
    """The model's SDPA calls from one forward on the meta device (in train mode for a training step): shapes,
    strides, dtypes, masks, dropout. Empty when the model cannot run on meta (then its first pass says)."""
    amp = {"fp16": "float16", "bf16": "bfloat16"}.get(cfg.amp or "")
    training = cfg.step == "train"
    try:
        model = build_model(cfg.model, device="meta", model_args=cfg.model_args)
        dtype = parse_dtype(cfg.dtype)
        model.train(training)
        state = meta_weights(model, dtype)
        if training:
            names = {name for name, _ in model.named_parameters()}
            state = {k: v.requires_grad_(True) if k in names and v.is_floating_point() else v for k, v in state.items()}
        x = meta_inputs(model, cfg.input_spec(), dtype)
        with analysis_lock, torch.set_grad_enabled(training):
            return record_calls(model, lambda: torch.func.functional_call(model, state, x.args, x.kwargs, strict=False),
                                autocast_dtype=amp)
    except Exception:  # noqa: BLE001 - a model meta cannot run: the run's first pass says what is wrong
        return []
