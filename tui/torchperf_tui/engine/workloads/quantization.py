"""Quantization through torchao: the schemes a run may ask for (`--quant`, an arm's `quant=`), what each needs of the
box (checked before a model is built), and the conversion of a built model's Linear layers, saying which were
converted and which were left as they were.

torchao is an optional extra (`torchperf-tui[quant]`), imported only when a run asks for a scheme. Its configs are
named as torchao names them in its current API (`torchao.quantization.quantize_` with a config object). Loads
without torch: the app's UI process unpickles a result's QuantReport.
"""

from __future__ import annotations

from dataclasses import dataclass

from torchperf_tui.engine.hardware.lazy_torch import torch
from torchperf_tui.engine.hardware.torch_notices import quiet_torch_notices


@dataclass(frozen=True)
class Scheme:
    """One quantization scheme: torchao's config for it, what it does, and where it runs."""

    name: str
    config: str  # the torchao.quantization class
    what: str
    cpu: bool  # torchao runs it on the CPU
    min_capability: tuple[int, int] | None = None  # on CUDA: the compute capability it needs
    dtype: str | None = None  # the model dtype its kernels take (None: any)
    group_size: int | None = None  # weights quantized in groups of this many input features


SCHEMES: dict[str, Scheme] = {s.name: s for s in (
    Scheme("int8wo", "Int8WeightOnlyConfig", "int8 weights per output channel, activations as they are", cpu=True),
    Scheme("int8dq", "Int8DynamicActivationInt8WeightConfig",
           "int8 weights per channel and int8 activations quantized per row at each call", cpu=True),
    Scheme("int4wo", "Int4WeightOnlyConfig", "int4 weights in groups of 128 (torchao's tinygemm kernel)", cpu=False,
           min_capability=(8, 0), dtype="bfloat16", group_size=128),
    Scheme("fp8", "Float8DynamicActivationFloat8WeightConfig",
           "float8 (e4m3) weights and activations, scaled per row, activations quantized at each call", cpu=False,
           min_capability=(8, 9)),
    Scheme("fp8wo", "Float8WeightOnlyConfig", "float8 (e4m3) weights, activations as they are", cpu=True),
)}
CPU_SCHEMES = tuple(name for name, scheme in SCHEMES.items() if scheme.cpu)
# A Linear with fewer input or output features than this is left as it is: its GEMM is too small for a
# quantized kernel to pay for its own quantizing and scaling, and torchao's kernels want whole tiles.
MIN_FEATURES = 16
INSTALL = "pip install 'torchperf-tui[quant]'"


@dataclass(frozen=True)
class QuantReport:
    """What a scheme did to a model: the Linear layers it converted, and each layer with weights it left as it was,
    with why ('too small: 8 in, 4 out', 'not a Linear (Conv2d)')."""

    scheme: str
    converted: tuple[str, ...]
    left: tuple[tuple[str, str], ...]

    def to_dict(self) -> dict:
        return {"scheme": self.scheme, "converted": list(self.converted), "left": [list(pair) for pair in self.left]}


def quant_problem(scheme: str | None, device: "torch.device", dtype_name: str) -> str | None:
    """Why `scheme` cannot run on `device` with a model in `dtype_name`, in one line (None: it can). Checked before
    a model is built."""
    if scheme is None:
        return None
    entry = SCHEMES[scheme]
    if device.type == "cpu" and not entry.cpu:
        gpu = "a CUDA GPU" + (f" of compute capability {'.'.join(map(str, entry.min_capability))} or newer"
                              if entry.min_capability > (8, 0) else "")
        *rest, last = CPU_SCHEMES
        return (f"quant {scheme} needs {gpu} (torchao has no CPU kernel for it); the CPU runs "
                f"{', '.join(rest)} or {last}")
    if device.type == "cuda" and entry.min_capability is not None:
        capability = tuple(torch.cuda.get_device_capability(device))
        if capability < entry.min_capability:
            need = ".".join(map(str, entry.min_capability))
            return (f"quant {scheme} needs compute capability {need} or newer; this GPU has "
                    f"{'.'.join(map(str, capability))}")
    if device.type not in ("cpu", "cuda"):
        return f"quant {scheme} runs on CPU and CUDA devices only, not {device.type}"
    if entry.dtype is not None and dtype_name != entry.dtype:
        return f"quant {scheme} takes a model in {entry.dtype} (its kernel's): give --dtype {entry.dtype}"
    if torchao_version() is None:
        return f"quant {scheme} needs torchao, which is not installed: {INSTALL}"
    return None


def torchao_version() -> str | None:
    """torchao's version, or None where it is not installed."""
    from importlib import metadata

    try:
        return metadata.version("torchao")
    except metadata.PackageNotFoundError:
        return None


def _torchao_quantization():
    """torchao.quantization, imported without the notices its import makes torch log (engine/hardware/
    torch_notices.py)."""
    quiet_torch_notices()
    import torchao.quantization

    return torchao.quantization


def _config(scheme: Scheme):
    """torchao's config object for `scheme`."""
    tq = _torchao_quantization()
    config = getattr(tq, scheme.config)
    if scheme.name == "int4wo":
        return config(group_size=scheme.group_size, int4_packing_format="tile_packed_to_4d")
    if scheme.name == "fp8":
        return config(granularity=tq.PerRow())
    return config()


def plan_layers(model: "torch.nn.Module", scheme: str) -> QuantReport:
    """Which of `model`'s layers `scheme` converts: every Linear with at least MIN_FEATURES input and output
    features (and whole groups of input features where the scheme groups them); every other layer that holds
    weights of its own is left, with why."""
    entry = SCHEMES[scheme]
    converted, left = [], []
    for name, module in model.named_modules():
        if isinstance(module, torch.nn.Linear):
            small = min(module.in_features, module.out_features) < MIN_FEATURES
            ragged = entry.group_size is not None and module.in_features % entry.group_size
            if small:
                left.append((name, f"too small: {module.in_features} in, {module.out_features} out"))
            elif ragged:
                left.append((name, f"{module.in_features} input features are not whole groups of "
                                   f"{entry.group_size}"))
            else:
                converted.append(name)
        elif any(p.dim() > 1 for p in module.parameters(recurse=False)):
            left.append((name, f"not a Linear ({type(module).__name__})"))
    return QuantReport(scheme=scheme, converted=tuple(converted), left=tuple(left))


def quantize_model(model: "torch.nn.Module", scheme: str) -> QuantReport:
    """Convert `model`'s Linear layers in place with torchao's config for `scheme` (plan_layers says which)."""
    report = plan_layers(model, scheme)
    if report.converted:
        chosen = set(report.converted)
        _torchao_quantization().quantize_(model, _config(SCHEMES[scheme]), filter_fn=lambda module, fqn: fqn in chosen)
    return report
