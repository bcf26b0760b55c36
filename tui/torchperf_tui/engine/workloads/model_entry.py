"""What the model registry says about a model, as plain data: the UI process lists and shows these without
importing torch (engine/workloads/models.py, which builds the models, needs it)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class ModelEntry:
    """One model the app can build: its name, task, default input shape (no batch dim), support, and where it
    comes from (`source`: "torchvision", "timm", "hf" or "custom"). A transformers model's task is its head
    ("causal-lm" or "base"); its name carries its prefix ("hf:llama", "timm:resnet18")."""

    name: str
    task: str
    input_shape: tuple[int, ...]
    supported: bool = True
    reason: str = ""
    source: str = "torchvision"


@dataclass(frozen=True)
class WeightsReference:
    """A torchvision weights entry's published cost: GMACs (`meta["_ops"]`) at its eval input size.

    `builder_kwargs` are what the builder itself would set for these weights (ViT's SWAG weights fix a
    larger `image_size`); they change the architecture's accepted size, not its weights.
    """

    model: str
    weights: str
    input_shape: tuple[int, ...]
    gmacs: float
    builder_kwargs: dict[str, Any] = field(default_factory=dict)
