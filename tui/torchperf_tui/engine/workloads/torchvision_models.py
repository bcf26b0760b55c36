"""torchvision models: what a builder is called with (weights=None: nothing is downloaded), the keyword arguments a
user may give it (--model-args, checked against the builder's and the model class's own), and the adapters of the
models whose forward does not take one batch tensor. The catalogue (names, tasks, input sizes) is
engine/workloads/model_catalogue.py's; resolving a spec of any source is engine/workloads/models.py's.
"""

from __future__ import annotations

import functools
import inspect
from typing import Any

import torch
from torch import nn

from torchperf_tui.engine.workloads.meta_build import parameters_on_meta
from torchperf_tui.engine.workloads.model_args import ModelArgs, check_keys, coerce


# --------------------------------------------------------------------------------------------------
# Input adapters: models whose forward does not take one batch tensor


class DetectionAdapter(nn.Module):
    """Feeds a torchvision detector a batch tensor (N, 3, H, W) as the list of images it expects."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, images: torch.Tensor):
        return self.model(list(images.unbind(0)))


class OpticalFlowAdapter(nn.Module):
    """Feeds RAFT a batch of frame pairs (N, 2, 3, H, W) as its two image arguments."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, pairs: torch.Tensor):
        if pairs.dim() != 5 or pairs.shape[1] != 2:
            raise ValueError(f"optical flow takes a batch of frame pairs (N, 2, 3, H, W), got {tuple(pairs.shape)}")
        return self.model(pairs[:, 0], pairs[:, 1])


# --------------------------------------------------------------------------------------------------
# Building


def builder_defaults(name: str, builder) -> dict[str, Any]:
    kwargs: dict[str, Any] = {"weights": None}
    params = inspect.signature(builder).parameters
    if "weights_backbone" in params:
        kwargs["weights_backbone"] = None  # else a detector/segmenter would fetch ImageNet backbone weights
    if name in ("googlenet", "inception_v3"):
        kwargs["init_weights"] = True  # what weights=None does anyway, said explicitly to skip a FutureWarning
    return kwargs


_BUILDER_OWN = frozenset({"weights", "progress", "weights_backbone", "self"})


@functools.lru_cache(maxsize=64)
def _torchvision_settings(name: str) -> dict[str, Any]:
    """The keyword arguments a torchvision model takes: its builder's own (num_classes of a detector...) and its
    class's (those the builder passes on: num_classes, dropout...), with their defaults (None where none)."""
    import torchvision.models as tvm

    builder = tvm.get_model_builder(name)
    with parameters_on_meta():
        model_class = type(builder(**builder_defaults(name, builder)))
    found: dict[str, Any] = {}
    for fn in (model_class.__init__, builder):
        for key, param in inspect.signature(fn).parameters.items():
            if key in _BUILDER_OWN or param.kind in (param.VAR_KEYWORD, param.VAR_POSITIONAL):
                continue
            found.setdefault(key, None if param.default is inspect.Parameter.empty else param.default)
    return found


def torchvision_kwargs(name: str, model_args: ModelArgs) -> dict[str, Any]:
    """--model-args for torchvision model `name` as its builder's keyword arguments: each key checked against what
    the builder and the model's class accept, each value parsed against its default."""
    if not model_args:
        return {}
    accepted = _torchvision_settings(name)
    check_keys(name, model_args, accepted, what="keyword argument")
    return {key: coerce(name, key, text, accepted[key]) for key, text in model_args}


def build(name: str, task: str, builder_kwargs: dict[str, Any]) -> nn.Module:
    """torchvision model `name` of `task` with random weights (weights=None), behind its adapter where its forward
    does not take one batch tensor; `builder_kwargs` override the builder's own (torchvision_kwargs checks a
    user's)."""
    import torchvision.models as tvm

    builder = tvm.get_model_builder(name)
    kwargs = builder_defaults(name, builder)
    kwargs.update(builder_kwargs)
    model = builder(**kwargs)
    if task == "detection":
        return DetectionAdapter(model)
    if task == "optical_flow":
        return OpticalFlowAdapter(model)
    return model
