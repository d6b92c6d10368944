"""A job whose step is a few wide matmuls, written as most scripts are: float32, no autocast. Where
bfloat16 matmuls run faster than float32 ones, mixed precision is the speed this job leaves
(tests/patches/test_autocast_bf16.py)."""

import argparse

import torch
import torch.nn.functional as F

parser = argparse.ArgumentParser()
parser.add_argument("--batch_size", type=int, default=256)
parser.add_argument("--max_iters", type=int, default=8)
args = parser.parse_args()

torch.manual_seed(0)
width = 256
model = torch.nn.Sequential(torch.nn.Linear(width, 4 * width), torch.nn.GELU(), torch.nn.Linear(4 * width, width),
                            torch.nn.GELU(), torch.nn.Linear(width, 16))
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
batches = torch.Generator().manual_seed(1)

for it in range(args.max_iters):
    x = torch.randn(args.batch_size, width, generator=batches)
    y = torch.randint(0, 16, (args.batch_size,), generator=batches)
    optimizer.zero_grad(set_to_none=True)
    logits = model(x)
    loss = F.cross_entropy(logits, y)
    loss.backward()
    optimizer.step()
    print(f"iter {it} loss {loss.item():.6f}")
