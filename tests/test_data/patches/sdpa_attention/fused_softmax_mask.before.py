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
        wei = q @ k.transpose(-2, -1) * k.size(-1) ** -0.5
        wei = F.softmax(wei.masked_fill(self.tril[:T, :T] == 0, float("-inf")), dim=-1)
        v = self.value(x)
        out = wei @ v
        return out


def build():
    return Head(), torch.randn(4, 9, 16)
