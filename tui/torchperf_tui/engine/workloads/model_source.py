"""Which source a model spec names, from its text alone (no torch: the app's picker and the records read it).

    resnet18                 torchvision's catalogue (an unprefixed name stays torchvision's)
    timm:NAME                a timm model, pretrained=False
    hf:TYPE, hf:DIRECTORY    a transformers model built from its config (AutoConfig.for_model, or a local config.json)
    package.module:factory   the user's own code
"""

from __future__ import annotations

SOURCES = ("torchvision", "timm", "hf", "custom")
PREFIXES = {"timm": "timm:", "hf": "hf:"}


def source_of(spec: str) -> str:
    """'torchvision', 'timm', 'hf' or 'custom' for a model spec as typed (the prefixes are case-insensitive)."""
    text = (spec or "").strip()
    lowered = text.lower()
    for source, prefix in PREFIXES.items():
        if lowered.startswith(prefix):
            return source
    return "custom" if ":" in text else "torchvision"
