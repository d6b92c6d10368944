"""Training entry point."""
import torch
from torch import nn

torch.set_float32_matmul_precision("high")  # TF32 tensor cores for float32 matmuls (added by InfraRSI)

model = nn.Linear(4, 1)
loss = model(torch.randn(2, 4)).sum()
loss.backward()
