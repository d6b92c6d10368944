"""A small GPT: 4 layers, d 128, T 128, vocab 1024."""

from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

ATTENTION = "manual"  # manual | sdpa


@dataclass
class GPTConfig:
    n_layer: int = 4
    n_head: int = 4
    n_embd: int = 128
    block_size: int = 128
    vocab_size: int = 1024


class Block(nn.Module):
    def __init__(self, cfg: GPTConfig):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(cfg.n_embd), nn.LayerNorm(cfg.n_embd)
        self.qkv = nn.Linear(cfg.n_embd, 3 * cfg.n_embd)
        self.proj = nn.Linear(cfg.n_embd, cfg.n_embd)
        self.mlp = nn.Sequential(nn.Linear(cfg.n_embd, 4 * cfg.n_embd), nn.GELU(), nn.Linear(4 * cfg.n_embd, cfg.n_embd))
        self.n_head = cfg.n_head

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(C, dim=2)
        q, k, v = (t.view(B, T, self.n_head, C // self.n_head).transpose(1, 2) for t in (q, k, v))
        if ATTENTION == "sdpa":
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            att = (q @ k.transpose(-2, -1)) / (k.size(-1) ** 0.5)
            att = att.masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), float("-inf"))
            y = att.softmax(-1) @ v
        x = x + self.proj(y.transpose(1, 2).reshape(B, T, C))
        return x + self.mlp(self.ln2(x))


class GPT(nn.Module):
    def __init__(self, cfg: GPTConfig):
        super().__init__()
        self.tok = nn.Embedding(cfg.vocab_size, cfg.n_embd)
        self.pos = nn.Embedding(cfg.block_size, cfg.n_embd)
        self.blocks = nn.Sequential(*[Block(cfg) for _ in range(cfg.n_layer)])
        self.head = nn.Linear(cfg.n_embd, cfg.vocab_size)

    def forward(self, idx, targets):
        x = self.tok(idx) + self.pos(torch.arange(idx.size(1)))
        logits = self.head(self.blocks(x))
        return logits, F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))
