"""Train a small GPT on a synthetic motif corpus; settings are the fields of TrainConfig."""

import numpy as np
import torch

from config import TrainConfig
from data import make_corpus
from model import GPT, GPTConfig


def train(cfg: TrainConfig) -> None:
    print(f"{cfg.grad_accum} micro-batches of {cfg.micro_batch_size} sequences per step")
    torch.manual_seed(cfg.seed)
    corpus = make_corpus(cfg.vocab_size)
    order = torch.Generator().manual_seed(cfg.seed)
    model = GPT(GPTConfig(block_size=cfg.seq_len, vocab_size=cfg.vocab_size, n_layer=cfg.n_layer,
                          n_head=cfg.n_head, n_embd=cfg.n_embd))
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.learning_rate)
    for step in range(cfg.num_steps):
        for _ in range(cfg.grad_accum):
            ix = torch.randint(len(corpus) - cfg.seq_len, (cfg.micro_batch_size,), generator=order)
            x = torch.stack([torch.from_numpy(corpus[i:i + cfg.seq_len].astype(np.int64)) for i in ix])
            y = torch.stack([torch.from_numpy(corpus[i + 1:i + 1 + cfg.seq_len].astype(np.int64)) for i in ix])
            _, loss = model(x, y)
            (loss / cfg.grad_accum).backward()
        opt.step()
        opt.zero_grad()
        print(f"step {step}: loss {loss.item():.4f}")


if __name__ == "__main__":
    train(TrainConfig())
