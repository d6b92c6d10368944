"""Loop by index over a ModuleList, nonzero(as_tuple=True), index_add_ and unsqueeze."""

import torch
from torch import nn


class SparseMoE(nn.Module):
    def __init__(self, dim=12, n_experts=6, k=2):
        super().__init__()
        self.gate = nn.Linear(dim, n_experts)
        self.experts = nn.ModuleList(
            [nn.Sequential(nn.Linear(dim, 4 * dim), nn.ReLU(), nn.Linear(4 * dim, dim)) for _ in range(n_experts)]
        )
        self.n_experts = n_experts
        self.k = k

    def forward(self, tokens):
        scores = self.gate(tokens)
        weights, chosen = scores.topk(self.k, dim=-1)
        weights = weights.softmax(dim=-1)
        y = tokens.new_zeros(tokens.shape)
        for i in range(self.n_experts):
            rows, which = (chosen == i).nonzero(as_tuple=True)
            y.index_add_(0, rows, self.experts[i](tokens[rows]) * weights[rows, which].unsqueeze(-1))
        return y


def build():
    return SparseMoE(), torch.randn(50, 12)
