"""A model whose time is all per-op Python and dispatch: hundreds of tiny layers at batch 1. On a CPU it
behaves like a small model on a fast GPU, where launch overhead dominates; bench/tui_fidelity.py uses it
(as `dispatch_bound:many_tiny_layers`, from this folder)."""

from torch import nn

LAYERS = 400


def many_tiny_layers() -> nn.Module:
    layers: list[nn.Module] = []
    for _ in range(LAYERS):
        layers += [nn.Linear(16, 16), nn.ReLU()]
    return nn.Sequential(*layers)


many_tiny_layers.input_shape = (16,)
