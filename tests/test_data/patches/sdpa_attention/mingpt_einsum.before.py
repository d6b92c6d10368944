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
        scores = torch.einsum("bhqd,bhkd->bhqk", q, k)
        scores = scores / math.sqrt(hs)
        mask = torch.triu(torch.ones(T, T, dtype=torch.bool, device=x.device), diagonal=1)
        scores = scores.masked_fill(mask, float("-inf"))
        weights = scores.softmax(dim=-1)
        # mix the values
        ctx = torch.einsum("bhqk,bhkd->bhqd", weights, v)
        return self.out(ctx.transpose(1, 2).reshape(B, T, C))


def build():
    return SelfAttention(), torch.randn(3, 10, 32)
