"""No DDP anywhere: nothing to synchronise."""
import torch

model = torch.nn.Linear(2, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for micro_step in range(4):
    model(torch.randn(1, 2)).sum().backward()
optimizer.step()
