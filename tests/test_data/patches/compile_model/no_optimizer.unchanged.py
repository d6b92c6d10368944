"""An evaluation script: no optimizer, so no training model to compile."""
import torch

model = torch.nn.Linear(2, 2)
for _ in range(3):
    print(model(torch.randn(1, 2)))
