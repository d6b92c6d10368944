import torch

model = torch.nn.Linear(4, 4)
optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.1, foreach=True)  # slow on purpose?
