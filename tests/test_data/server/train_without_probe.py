"""
A plain training script, the way it looks before InfraRSI: no probe, losses printed.
"""

import argparse
import time

import torch

from data import make_corpus
from model import GPT, GPTConfig

parser = argparse.ArgumentParser()
parser.add_argument("--batch_size", type=int, default=8)
parser.add_argument("--block_size", type=int, default=64)
parser.add_argument("--max_iters", type=int, default=200)
parser.add_argument("--seed", type=int, default=1337)
parser.add_argument("--learning_rate", type=float, default=1e-3)
args = parser.parse_args()

torch.manual_seed(args.seed)
train_data = torch.from_numpy(make_corpus(512).astype("int64"))


def get_batch():
    ix = torch.randint(len(train_data) - args.block_size, (args.batch_size,))
    x = torch.stack([train_data[i:i + args.block_size] for i in ix])
    y = torch.stack([train_data[i + 1:i + 1 + args.block_size] for i in ix])
    return x, y


model = GPT(GPTConfig(block_size=args.block_size, vocab_size=512, n_layer=2))
optimizer = torch.optim.AdamW(model.parameters(), lr=args.learning_rate)

t0 = time.time()
for iter_num in range(args.max_iters):
    X, Y = get_batch()
    logits, loss = model(X, Y)
    loss.backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    t1 = time.time()
    print(f"iter {iter_num}: loss {loss.item():.4f}, time {(t1 - t0) * 1000:.2f}ms", flush=True)
    t0 = t1
