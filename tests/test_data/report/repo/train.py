"""Train a small GPT on a noisy repeating pattern (nanoGPT style: globals overridable with --key=value)."""

import argparse
import time

import torch

from data import get_batch
from model import GPT, GPTConfig

parser = argparse.ArgumentParser()
parser.add_argument("--batch_size", type=int, default=16)  # sequences per optimizer step
parser.add_argument("--micro_batch_size", type=int, default=4)
parser.add_argument("--threads", type=int, default=2)
parser.add_argument("--dtype", default="float32")
parser.add_argument("--compile", action="store_true")
parser.add_argument("--max_iters", type=int, default=200)
args = parser.parse_args()

torch.manual_seed(1337)
torch.set_num_threads(args.threads)
model = GPT(GPTConfig())
if args.compile:
    model = torch.compile(model)
optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4)
accum = args.batch_size // args.micro_batch_size
for it in range(args.max_iters):
    t0 = time.perf_counter()
    for _ in range(accum):
        x, y = get_batch(args.micro_batch_size)
        with torch.autocast("cpu", dtype=getattr(torch, args.dtype), enabled=args.dtype != "float32"):
            _, loss = model(x, y)
        (loss / accum).backward()
    optimizer.step()
    optimizer.zero_grad()
    print(f"iter {it}: loss {loss.item():.4f}, time {(time.perf_counter() - t0) * 1000:.2f}ms")
