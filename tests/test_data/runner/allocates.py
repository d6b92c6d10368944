"""Holds --alloc_mb more resident memory at every step, in a child process when --in_child is set
(the budget covers the whole process tree)."""

import argparse
import os
import subprocess
import sys
import time

import torch

from infrarsi import probe

parser = argparse.ArgumentParser()
parser.add_argument("--max_iters", type=int, default=10)
parser.add_argument("--batch_size", type=int, default=4)
parser.add_argument("--block_size", type=int, default=8)
parser.add_argument("--alloc_mb", type=int, default=0)
parser.add_argument("--in_child", action="store_true")
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


if args.in_child:
    code = f"import time; b = b'x' * ({args.alloc_mb} * 10 * 2**20); print('held', flush=True); time.sleep(600)"
    child = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    child.stdout.readline()  # the child holds its memory from here on, however slow it was to start
held = []
for it in range(args.max_iters):
    if not args.in_child:
        # Written, not just reserved: untouched pages would not count as resident.
        held.append(os.urandom(1) * (args.alloc_mb * 2**20))
    time.sleep(0.1)
    train_step(4.0 * 0.9**it)
    probe.step(loss=4.0 * 0.9**it, tokens=args.batch_size * args.block_size)
