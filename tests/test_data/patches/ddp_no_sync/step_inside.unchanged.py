"""The optimizer steps on every micro-batch: every backward must sync."""
import torch
from torch.nn.parallel import DistributedDataParallel as DDP

model = DDP(torch.nn.Linear(2, 1))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for i in range(4):
    model(torch.randn(1, 2)).sum().backward()
    optimizer.step()
