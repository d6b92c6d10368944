"""Training entry point."""
import torch
from torch import nn

model = nn.Linear(4, 1)
loss = model(torch.randn(2, 4)).sum()
loss.backward()
