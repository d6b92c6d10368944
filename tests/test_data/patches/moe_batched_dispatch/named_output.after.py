"""The weighted output named first, then index_add_ (the moe_gpt fixture's spelling)."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Expert(nn.Module):
    def __init__(self, d, hidden):
        super().__init__()
        self.w1 = nn.Linear(d, hidden)
        self.w2 = nn.Linear(hidden, d)

    def forward(self, x):
        return self.w2(F.gelu(self.w1(x)))


class MoE(nn.Module):
    def __init__(self, d=16, hidden=32, n_experts=4, top_k=2):
        super().__init__()
        self.router = nn.Linear(d, n_experts, bias=False)
        self.experts = nn.ModuleList([Expert(d, hidden) for _ in range(n_experts)])
        self.top_k = top_k

    def forward(self, x):
        B, T, C = x.shape
        x = x.view(-1, C)
        logits = self.router(x)
        top_w, top_idx = torch.topk(logits.softmax(dim=-1), self.top_k, dim=-1)
        top_w = top_w / top_w.sum(dim=-1, keepdim=True)
        out = torch.zeros_like(x)
        # send every token to its experts
        # batched dispatch: sort (token, slot) pairs by expert, gather once, scatter once
        expert_ids = top_idx.flatten()
        sort_order = expert_ids.argsort(stable=True)
        token_ids = sort_order // top_idx.size(-1)
        tokens_per_expert = expert_ids.bincount(minlength=len(self.experts)).tolist()
        expert_out = torch.cat([expert(chunk) for expert, chunk in zip(self.experts, x[token_ids].split(tokens_per_expert))])
        out.index_add_(0, token_ids, expert_out * top_w.flatten()[sort_order, None])
        return out.view(B, T, C)


def build():
    return MoE(), torch.randn(3, 20, 16)
