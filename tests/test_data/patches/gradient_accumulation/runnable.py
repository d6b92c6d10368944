"""A script with no gradient accumulation: one forward and backward over each whole batch."""
import argparse

import torch
import torch.nn.functional as F

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=6)
parser.add_argument("--reduction", default="mean")
args = parser.parse_args()

torch.manual_seed(0)
inputs = torch.randn(96, 10)
labels = torch.randint(0, 3, (96,))
loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(inputs, labels), batch_size=16)
model = torch.nn.Sequential(torch.nn.Linear(10, 32), torch.nn.ReLU(), torch.nn.Linear(32, 3))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)

for batch_idx, (data, target) in enumerate(loader):
    optimizer.zero_grad()
    output = model(data)
    loss = F.cross_entropy(output, target, reduction=args.reduction) / (16 if args.reduction == "sum" else 1)
    loss.backward()
    optimizer.step()
    print(f"step {batch_idx} loss {loss.item():.9f} checksum {sum(p.double().sum().item() for p in model.parameters()):.12f}")
    if batch_idx + 1 == args.steps:
        break
