"""Experts as slices of one stacked weight, not a ModuleList of modules."""

import torch
from torch import nn


class StackedMoE(nn.Module):
    def __init__(self, dim=8, n_experts=4):
        super().__init__()
        self.gate = nn.Linear(dim, n_experts)
        self.w = nn.Parameter(torch.randn(n_experts, dim, dim) * 0.1)

    def forward(self, x):
        w, idx = self.gate(x).softmax(-1).topk(2, dim=-1)
        out = torch.zeros_like(x)
        for e in range(self.w.size(0)):
            tok, slot = torch.where(idx == e)
            out[tok] += w[tok, slot, None] * (x[tok] @ self.w[e])
        return out
