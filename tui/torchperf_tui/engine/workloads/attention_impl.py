"""A transformers model's attention implementation (`--attn`, an arm's `attn=`): what the box must have for each, and
the word transformers takes. Which implementations a model's class supports is transformers' to say as it builds the
model (its refusal is one line: engine/workloads/hf_models.py)."""

from __future__ import annotations

import importlib.util

# The implementation that needs a package of its own, and that package's import name.
NEEDS_PACKAGE = {"flash_attention_2": "flash_attn"}


def attn_problem(attn: str | None, model, device) -> str | None:
    """Why `attn` cannot be asked of `model` (a spec) on `device` (a torch.device), in one line; None: it can (or
    none was asked)."""
    if attn is None:
        return None
    if not (isinstance(model, str) and model.startswith("hf:")):
        return (f"attn {attn}: an attention implementation is a transformers model's setting (hf:...); "
                f"{model if isinstance(model, str) else type(model).__name__} is not one")
    package = NEEDS_PACKAGE.get(attn)
    if package is not None and device.type != "cuda":
        return f"attn {attn} runs on CUDA only ({package}'s kernels); this run is on {device.type}"
    if package is not None and importlib.util.find_spec(package) is None:
        return f"attn {attn} needs the {package} package, which is not installed (pip install flash-attn)"
    return None
