"""A small image classifier written as most scripts are: float32, NCHW, no autocast. Its step is a
convolution stem and a few wide matmuls, so both mixed precision (where bfloat16 matmuls run
faster than float32 ones) and the channels-last format have speed to find
(the patch tests in tests/patches/ that run it)."""

import argparse

import torch
import torch.nn.functional as F

parser = argparse.ArgumentParser()
parser.add_argument("--batch_size", type=int, default=64)
parser.add_argument("--max_iters", type=int, default=8)
args = parser.parse_args()

torch.manual_seed(0)
width = 256
model = torch.nn.Sequential(
    torch.nn.Conv2d(3, 16, 3, stride=2, padding=1), torch.nn.GELU(),
    torch.nn.Conv2d(16, 16, 3, stride=2, padding=1), torch.nn.GELU(), torch.nn.Flatten(),
    torch.nn.Linear(16 * 8 * 8, width), torch.nn.GELU(), torch.nn.Linear(width, 4 * width), torch.nn.GELU(),
    torch.nn.Linear(4 * width, 16),
)
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
batches = torch.Generator().manual_seed(1)

for it in range(args.max_iters):
    x = torch.randn(args.batch_size, 3, 32, 32, generator=batches)
    y = torch.randint(0, 16, (args.batch_size,), generator=batches)
    optimizer.zero_grad(set_to_none=True)
    logits = model(x)
    loss = F.cross_entropy(logits, y)
    loss.backward()
    optimizer.step()
    print(f"iter {it} loss {loss.item():.6f}")
