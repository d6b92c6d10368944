"""A job with no gradient accumulation: one forward and backward over each whole batch. Its batch
size is the workload's; the gradient_accumulation patch's split count is what the search may tune
(tests/stages/test_split_knob.py). Each forward prints its rows, so the log shows the split."""

import argparse

import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

parser = argparse.ArgumentParser()
parser.add_argument("--batch_size", type=int, default=16)
parser.add_argument("--max_iters", type=int, default=8)
args = parser.parse_args()

torch.manual_seed(0)
inputs = torch.randn(512, 64)
labels = torch.randint(0, 4, (512,))
loader = DataLoader(TensorDataset(inputs, labels), batch_size=args.batch_size)
model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 4))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)

for it, (data, target) in enumerate(loader):
    optimizer.zero_grad()
    print(f"forward over {len(data)} rows")
    loss = F.cross_entropy(model(data), target)
    loss.backward()
    optimizer.step()
    print(f"iter {it} loss {loss.item():.6f}")
    if it + 1 == args.max_iters:
        break
