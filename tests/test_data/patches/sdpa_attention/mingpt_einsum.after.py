"""minGPT-like spelling with einsum, a separate scaling step and a local triu mask."""

import math

import torch
import torch.nn as nn


class SelfAttention(nn.Module):
    def __init__(self, d_model=32, n_heads=4):
        super().__init__()
        self.qkv = nn.Linear(d_model, 3 * d_model, bias=False)
        self.out = nn.Linear(d_model, d_model, bias=False)
        self.n_heads = n_heads

    def forward(self, x):
        B, T, C = x.shape
        hs = C // self.n_heads
        q, k, v = self.qkv(x).view(B, T, 3, self.n_heads, hs).permute(2, 0, 3, 1, 4)
        # mix the values
        ctx = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True, scale=1.0 / math.sqrt(hs))
        return self.out(ctx.transpose(1, 2).reshape(B, T, C))


def build():
    return SelfAttention(), torch.randn(3, 10, 32)
