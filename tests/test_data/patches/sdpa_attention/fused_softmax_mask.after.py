"""Fill and softmax in one statement, an inverted tril mask, scale as k.size(-1) ** -0.5."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Head(nn.Module):
    """One head of causal self-attention, the way the video tutorial writes it."""

    def __init__(self, n_embd=16, head_size=8, block_size=16):
        super().__init__()
        self.key = nn.Linear(n_embd, head_size, bias=False)
        self.query = nn.Linear(n_embd, head_size, bias=False)
        self.value = nn.Linear(n_embd, head_size, bias=False)
        self.register_buffer("tril", torch.tril(torch.ones(block_size, block_size)))

    def forward(self, x):
        B, T, C = x.shape
        k = self.key(x)
        q = self.query(x)
        v = self.value(x)
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return out


def build():
    return Head(), torch.randn(4, 9, 16)
