"""A well-behaved job: a loss that falls by 10% a step, reported through the probe."""

import argparse
import time

import torch

from infrarsi import probe

parser = argparse.ArgumentParser()
parser.add_argument("--max_iters", type=int, default=10)
parser.add_argument("--batch_size", type=int, default=4)
parser.add_argument("--block_size", type=int, default=8)
parser.add_argument("--step_s", type=float, default=0.02, help="seconds each step takes")
parser.add_argument("--loss_shift", type=float, default=0.0, help="moves every loss: a numerics change")
args = parser.parse_args()

# A real training step for the launcher to observe: an embedding of the batch's token ids, a loss
# backward() runs on, an optimizer step. lr=0 keeps the weights, so the loss is the scripted one.
model = torch.nn.Embedding(256, 4)
optimizer = torch.optim.SGD(model.parameters(), lr=0.0)


def train_step(loss_value, rows=None):
    """One optimizer step on a (rows, block_size) batch of token ids whose loss is ``loss_value``."""
    tokens = torch.zeros(rows or args.batch_size, args.block_size, dtype=torch.long)
    loss = model(tokens).sum() * 0 + loss_value
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()


probe.model(params=1000, layers=1, heads=1, head_dim=8, seq_len=args.block_size)
for it in range(args.max_iters):
    with probe.phase("forward"):
        time.sleep(args.step_s)
    loss = 4.0 * 0.9**it + args.loss_shift
    train_step(loss)
    probe.step(loss=loss, tokens=args.batch_size * args.block_size)
    print(f"iter {it}: loss {loss:.4f}, time {args.step_s * 1000:.2f}ms")
