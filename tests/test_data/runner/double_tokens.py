"""Counts every token twice: its tokens per step differ from the contract's."""

import argparse

import torch

from infrarsi import probe

parser = argparse.ArgumentParser()
parser.add_argument("--max_iters", type=int, default=10)
parser.add_argument("--batch_size", type=int, default=4)
parser.add_argument("--block_size", type=int, default=8)
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


for it in range(args.max_iters):
    train_step(4.0 * 0.9**it, rows=2 * args.batch_size)
    probe.step(loss=4.0 * 0.9**it, tokens=2 * args.batch_size * args.block_size)
