import torch

compile = True
model = torch.nn.Linear(2, 2)
optimizer = torch.optim.AdamW(model.parameters())
if compile:
    model = torch.compile(model)
