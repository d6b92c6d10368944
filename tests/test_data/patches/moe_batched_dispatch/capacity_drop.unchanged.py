"""A capacity limit drops tokens inside the loop: batching would change which tokens run."""

import torch
from torch import nn


class CappedMoE(nn.Module):
    def __init__(self, dim=8, n_experts=4, capacity=5):
        super().__init__()
        self.gate = nn.Linear(dim, n_experts)
        self.experts = nn.ModuleList([nn.Linear(dim, dim) for _ in range(n_experts)])
        self.capacity = capacity

    def forward(self, x):
        w, idx = self.gate(x).softmax(-1).topk(2, dim=-1)
        out = torch.zeros_like(x)
        for e, expert in enumerate(self.experts):
            tok, slot = torch.where(idx == e)
            tok, slot = tok[: self.capacity], slot[: self.capacity]
            out[tok] += w[tok, slot, None] * expert(x[tok])
        return out
