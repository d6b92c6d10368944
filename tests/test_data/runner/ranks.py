"""A job for torchrun: rank 1 is four times slower; with --nan_at, rank 0's loss goes NaN at that
step and every rank then hangs, as a diverged job stuck in a collective would. With --alloc_mb,
rank r holds (r + 1) x that many MB from its first step on."""

import argparse
import math
import os
import time

import torch

from infrarsi import probe

parser = argparse.ArgumentParser()
parser.add_argument("--max_iters", type=int, default=10)
parser.add_argument("--batch_size", type=int, default=4)
parser.add_argument("--block_size", type=int, default=8)
parser.add_argument("--step_s", type=float, default=0.02)
parser.add_argument("--nan_at", type=int, default=-1)
parser.add_argument("--alloc_mb", type=int, default=0)
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


rank = int(os.environ.get("RANK", "0"))
print(f"rank {rank} pid {os.getpid()} token {os.environ.get('INFRARSI_TRIAL_TOKEN')}", flush=True)
# Every rank says who it is before any allocates: a rank over the budget gets the group killed,
# and the tests find each worker by the line above.
open(f"started.{rank}", "w").close()
deadline = time.monotonic() + 60
while time.monotonic() < deadline and not all(os.path.exists(f"started.{r}")
                                               for r in range(int(os.environ.get("WORLD_SIZE", "1")))):
    time.sleep(0.01)
# Written, not just reserved: untouched pages would not count as resident.
held = os.urandom(1) * (args.alloc_mb * (rank + 1) * 2**20)
for it in range(args.max_iters):
    time.sleep(args.step_s * (1 + 3 * rank))
    loss = math.nan if it == args.nan_at and rank == 0 else 4.0 * 0.9**it
    train_step(loss, rows=args.batch_size // int(os.environ.get("WORLD_SIZE", "1")))
    probe.step(loss=loss, tokens=args.batch_size * args.block_size)
    if it == args.nan_at:
        time.sleep(600)
