"""How large a model is before it is built, and whether it fits: its parameters and the bytes of its weights from a
build on the meta device (nothing allocated: llama's default 6.7 B parameters in seconds), and a one-line refusal
(ModelTooLarge) of weights that cannot fit the memory free where they are built. engine/workloads/models.py
exports both.
"""

from __future__ import annotations

from typing import Callable

import torch
from torch import nn

from torchperf_tui.core.formatting import format_bytes
from torchperf_tui.core.errors import ModelTooLarge, Remedy
from torchperf_tui.engine.workloads.model_args import ModelArgs, format_model_args
from torchperf_tui.engine.hardware.device_choice import free_bytes as measured_free
from torchperf_tui.engine.workloads import hf_models
from torchperf_tui.engine.workloads.inputs import dtype_name
from torchperf_tui.engine.workloads.models import build_model, source_of


def model_footprint(spec: str, model_args: ModelArgs = (), dtype: torch.dtype = torch.float32) -> tuple[int, int]:
    """(parameters, bytes of its weights and buffers in `dtype`) from a build on the meta device: nothing is
    allocated (llama's default config, 6.7 B parameters, in about a second). Tied weights count once; integer
    buffers keep their own size."""
    return _parameter_count(model := _meta_build(spec, model_args, dtype)), _weight_bytes(model, dtype)


def _meta_build(spec: str, model_args: ModelArgs, dtype: torch.dtype) -> nn.Module:
    """The model on meta: hf: built in `dtype` as a run builds it, the others in float32 (their build's)."""
    return build_model(spec, "meta", model_args=model_args, dtype=dtype if source_of(spec) == "hf" else None)


def _parameter_count(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


def _weight_bytes(model: nn.Module, dtype: torch.dtype) -> int:
    """What the model's parameters and buffers take with its floating ones in `dtype` (each tensor once)."""
    itemsize = torch.empty((), dtype=dtype).element_size()
    tensors = {id(t): t for t in [*model.parameters(), *model.buffers()]}.values()
    return sum(t.numel() * (itemsize if t.is_floating_point() else t.element_size()) for t in tensors)


def _count_words(count: int) -> str:
    """6738415616 -> '6.74 B', 11689512 -> '11.7 M', 51300011175999 -> '51.3 T'."""
    for size, unit in ((1e12, "T"), (1e9, "B"), (1e6, "M"), (1e3, "k")):
        if count >= size:
            value = count / size
            return f"{value:.3g} {unit}" if value < 100 else f"{value:.0f} {unit}"
    return str(count)


def _embedding_bytes(model: nn.Module, dtype: torch.dtype) -> int:
    """What a transformers model's token embeddings take in `dtype`: its input embedding and its output layer (once
    where the two are tied). 0 for a model without them."""
    tensors: dict[int, torch.Tensor] = {}
    for getter in ("get_input_embeddings", "get_output_embeddings"):
        try:
            layer = getattr(model, getter)()
        except Exception:  # noqa: BLE001 - a model without token embeddings (vision, audio) has none to count
            layer = None
        if isinstance(layer, nn.Module):
            tensors.update((id(t), t) for t in layer.parameters())
    itemsize = torch.empty((), dtype=dtype).element_size()
    return sum(t.numel() * (itemsize if t.is_floating_point() else t.element_size()) for t in tensors.values())


def _vocabulary_remedy(spec: str, model_args: ModelArgs, model: nn.Module, held_in: torch.dtype, need: int,
                       free: int) -> tuple[str, Remedy | None]:
    """(what the weights are mostly, the remedy that makes them fit) where a transformers model's vocabulary is most
    of its weights: (', 29.8 TiB of it the embeddings of its 1,000,000,000-token vocabulary', model_args
    'vocab_size=493000 or smaller'); the remedy asks for fewer layers too where the rest alone does not fit either.
    ('', None) otherwise."""
    embeddings = _embedding_bytes(model, held_in)
    if embeddings * 2 <= need:
        return "", None
    vocab = hf_models.int_setting(hf_models.text_config(hf_models.load_config(spec, model_args)), "vocab_size")
    if vocab is None:
        return "", None
    said = f", {format_bytes(embeddings)} of it the embeddings of its {vocab:,}-token vocabulary"
    rest = need - embeddings
    if rest >= free:
        key = hf_models.layers_key(hf_models.load_config(spec, model_args))
        layers = f"{key}=2," if key is not None else ""
        return said, Remedy("model_args", f"{layers}vocab_size=32000", "for fewer layers and a smaller vocabulary")
    fits = int(vocab * (free - rest) / embeddings * 0.9)  # a tenth spare: activations and the allocator need some
    fits = fits // 1000 * 1000 if fits >= 10_000 else fits
    return said, (Remedy("model_args", f"vocab_size={fits} or smaller") if fits >= 1 else None)


def _too_large_remedies(spec: str, model_args: ModelArgs, dtype_helps: bool,
                        vocabulary: Remedy | None = None) -> list[Remedy]:
    remedies = []
    if vocabulary is not None:
        remedies.append(vocabulary)
    elif source_of(spec) == "hf":
        key = hf_models.layers_key(hf_models.load_config(spec, model_args))
        if key is not None:
            remedies.append(Remedy("model_args", f"{key}=2", "for fewer layers"))
    elif model_args:  # the overrides made it this large (num_classes=99999999999)
        remedies.append(Remedy("model_args", f"values smaller than {format_model_args(model_args)}"))
    else:
        remedies.append(Remedy(None, "a smaller model"))
    if dtype_helps:
        remedies.append(Remedy("dtype", "bfloat16", "for half the bytes"))
    return remedies


def check_fits(spec: str, model_args: ModelArgs, dtype: torch.dtype, device: str | torch.device, *,
               free_bytes: Callable[[torch.device], int | None] | None = None) -> None:
    """ModelTooLarge, in one line with the size, when the model's weights alone cannot fit the memory free where
    they are built, told from a meta build before anything is allocated: "hf:llama: 6.74 B parameters are 25.1 GiB
    in float32; the CPU has 11.2 GiB free; give --model-args num_hidden_layers=2 ...".

    hf: models are built on the device directly in `dtype`. timm: models are built on the device in float32, then
    cast; torchvision and custom ones in float32 on the CPU, then moved (and cast) to the device, which is checked
    too. `free_bytes(device)` is the seam for the free memory (engine/workloads/inputs.free_bytes by default;
    None: unknown, nothing refused)."""
    free_of = free_bytes or measured_free
    device = torch.device(device)
    if device.type == "meta":
        return
    source = source_of(spec)
    model = _meta_build(spec, model_args, dtype)
    count = _parameter_count(model)
    if source == "hf":
        checks = [(device, dtype)]
    else:
        built_on = device if source == "timm" else torch.device("cpu")
        checks = [(built_on, torch.float32)] + ([(device, dtype)] if device != built_on else [])
    wide = dtype.is_floating_point and torch.finfo(dtype).bits > 16
    for where, held_in in checks:
        need, free = _weight_bytes(model, held_in), free_of(where)
        if free is not None and need > free:
            place = "the CPU has" if where.type == "cpu" else f"{where} has"
            dtype_helps = wide and held_in == dtype
            # Fewer layers do not help a model whose vocabulary is most of its weights: it is told so, with the size
            # of vocabulary that fits.
            mostly, vocabulary = _vocabulary_remedy(spec, model_args, model, held_in, need, free) \
                if source == "hf" else ("", None)
            raise ModelTooLarge(f"{_label(spec)}: {_count_words(count)} parameters are {format_bytes(need)} in "
                                f"{dtype_name(held_in)}{mostly}; {place} {format_bytes(free)} free",
                                remedies=_too_large_remedies(spec, model_args, dtype_helps, vocabulary))


def _label(spec: str) -> str:
    """The model as a message names it: 'hf:llama', 'timm:resnet18', 'resnet18', 'pkg.mod:build'."""
    spec = spec.strip()
    source = source_of(spec)
    if source in ("hf", "timm"):
        return f"{source}:{spec.partition(':')[2].strip()}"
    return spec.lower() if source == "torchvision" else spec
