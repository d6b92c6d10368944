"""Every expert sees every token (soft MoE): there is nothing to dispatch."""

import torch
from torch import nn


class SoftMoE(nn.Module):
    def __init__(self, dim=8, n_experts=3):
        super().__init__()
        self.gate = nn.Linear(dim, n_experts)
        self.experts = nn.ModuleList([nn.Linear(dim, dim) for _ in range(n_experts)])

    def forward(self, x):
        w = self.gate(x).softmax(dim=-1)
        out = torch.zeros_like(x)
        for e, expert in enumerate(self.experts):
            out += w[:, e, None] * expert(x)
        return out
