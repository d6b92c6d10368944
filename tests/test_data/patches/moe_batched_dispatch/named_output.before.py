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
        for e, expert in enumerate(self.experts):
            tok, slot = torch.where(top_idx == e)
            if tok.numel() == 0:
                continue
            y = expert(x[tok]) * top_w[tok, slot, None]
            out.index_add_(0, tok, y)
        return out.view(B, T, C)


def build():
    return MoE(), torch.randn(3, 20, 16)
