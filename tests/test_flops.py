"""FLOPs per token against torch's own FLOP counter on a real small GPT, and MFU arithmetic."""

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.flop_counter import FlopCounterMode

from infrarsi.flops import flops_per_token, flops_per_token_from_facts, mfu


class Block(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.fc, self.out = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=2)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        # Written out rather than SDPA: torch's FLOP counter does not count the CPU SDPA kernel.
        att = (q @ k.transpose(-2, -1)) / (d // self.heads) ** 0.5
        att = att.masked_fill(torch.ones(t, t, dtype=torch.bool).triu(1), float("-inf")).softmax(-1)
        y = (att @ v).transpose(1, 2).reshape(b, t, d)
        x = x + self.proj(y)
        return x + self.out(F.gelu(self.fc(self.ln2(x))))


class TinyGPT(nn.Module):
    def __init__(self, vocab, d, layers, heads, seq_len):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(vocab, d), nn.Embedding(seq_len, d)
        self.blocks = nn.ModuleList(Block(d, heads) for _ in range(layers))
        self.ln_f = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)
        self.head.weight = self.wte.weight  # tied, as in nanoGPT

    def forward(self, idx):
        x = self.wte(idx) + self.wpe(torch.arange(idx.shape[1]))
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln_f(x))


def test_formula_matches_counted_training_flops_of_a_real_gpt():
    vocab, d, layers, heads, seq_len, batch = 512, 128, 3, 4, 64, 2
    model = TinyGPT(vocab, d, layers, heads, seq_len)
    idx = torch.randint(vocab, (batch, seq_len))
    with FlopCounterMode(display=False) as counter:
        logits = model(idx)
        F.cross_entropy(logits.view(-1, vocab), idx.view(-1)).backward()
    counted = counter.get_total_flops() / (batch * seq_len)
    # nanoGPT's N: every parameter except the position embedding, which no matmul touches.
    n = sum(p.numel() for p in model.parameters()) - model.wpe.weight.numel()
    formula = flops_per_token(params=n, layers=layers, heads=heads, head_dim=d // heads, seq_len=seq_len)
    # What the formula ignores (biases, layer norms: 6 FLOPs per weight but no matmul) is ~1% here.
    assert formula == pytest.approx(counted, rel=0.02)


def test_formula_on_gpt2_small_as_nanogpt_counts_it():
    # GPT-2 124M as nanoGPT reports it: 123.69M parameters (position embedding excluded), L=12, H=12, Q=64, T=1024.
    got = flops_per_token(params=123_690_000, layers=12, heads=12, head_dim=64, seq_len=1024)
    assert got == 6 * 123_690_000 + 12 * 12 * 12 * 64 * 1024


def test_moe_facts_use_active_params():
    facts = {"params": 10_000, "active_params": 4_000, "layers": 2, "heads": 2, "head_dim": 8, "seq_len": 16}
    assert flops_per_token_from_facts(facts) == 6 * 4_000 + 12 * 2 * 2 * 8 * 16
    with pytest.raises(ValueError, match="heads"):
        flops_per_token_from_facts({"params": 1, "layers": 1, "head_dim": 1, "seq_len": 1})


def test_mfu_is_achieved_over_peak():
    assert mfu(1000.0, 1e6, 2e9) == pytest.approx(0.5)
    with pytest.raises(ValueError):
        mfu(1.0, 1.0, 0.0)
