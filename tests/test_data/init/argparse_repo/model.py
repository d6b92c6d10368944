import torch
import torch.nn as nn


class TinyLM(nn.Module):
    def __init__(self, vocab_size, n_embd, n_layer):
        super().__init__()
        self.emb = nn.Embedding(vocab_size, n_embd)
        self.blocks = nn.Sequential(*[nn.Linear(n_embd, n_embd) for _ in range(n_layer)])
        self.head = nn.Linear(n_embd, vocab_size)

    def forward(self, idx, targets):
        logits = self.head(self.blocks(self.emb(idx)))
        return torch.nn.functional.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))
