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
        # batched dispatch: sort (token, slot) pairs by expert, gather once, scatter once
        expert_ids = chosen.flatten()
        sort_order = expert_ids.argsort(stable=True)
        token_ids = sort_order // chosen.size(-1)
        tokens_per_expert = expert_ids.bincount(minlength=len(self.experts)).tolist()
        expert_out = torch.cat([expert(chunk) for expert, chunk in zip(self.experts, tokens[token_ids].split(tokens_per_expert))])
        y.index_add_(0, token_ids, expert_out * weights.flatten()[sort_order, None])
        return y


def build():
    return SparseMoE(), torch.randn(50, 12)
