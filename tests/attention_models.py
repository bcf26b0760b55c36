"""A tiny attention model for the app's tests, loaded through the `module:factory` path a user's own model takes:
one self-attention block calling F.scaled_dot_product_attention on an input of (batch, sequence, embedding)."""

from __future__ import annotations

import torch
from torch import nn


class SelfAttention(nn.Module):
    def __init__(self, embed: int = 32, heads: int = 4) -> None:
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(embed, 3 * embed)
        self.out = nn.Linear(embed, embed)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, seq, embed = x.shape
        q, k, v = self.qkv(x).view(batch, seq, 3, self.heads, embed // self.heads).permute(2, 0, 3, 1, 4).unbind(0)
        y = nn.functional.scaled_dot_product_attention(q.contiguous(), k.contiguous(), v.contiguous(), is_causal=True)
        return self.out(y.transpose(1, 2).reshape(batch, seq, embed))


class TinyAttention(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.attn = SelfAttention()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.attn(x)


def tiny_attention() -> nn.Module:
    return TinyAttention()


tiny_attention.input_shape = (64, 32)  # (sequence, embedding), without the batch
