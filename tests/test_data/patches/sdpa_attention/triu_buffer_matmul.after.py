"""A boolean triu(diagonal=1) buffer, torch.matmul, a division by sqrt(head_dim), torch.softmax."""

import math

import torch
from torch import nn
import torch.nn.functional as F


class Attention(nn.Module):
    def __init__(self, dim=24, heads=3, max_len=32):
        super().__init__()
        self.heads = heads
        self.head_dim = dim // heads
        self.to_qkv = nn.Linear(dim, dim * 3)
        self.proj = nn.Linear(dim, dim)
        self.register_buffer("mask", torch.triu(torch.ones(max_len, max_len), diagonal=1).bool(), persistent=False)

    def forward(self, x):
        B, T, _ = x.shape
        q, k, v = (t.view(B, T, self.heads, self.head_dim).transpose(1, 2) for t in self.to_qkv(x).chunk(3, dim=-1))
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=1.0 / math.sqrt(self.head_dim))
        return self.proj(out.transpose(1, 2).reshape(B, T, -1))


def build():
    return Attention(), torch.randn(2, 20, 24)
