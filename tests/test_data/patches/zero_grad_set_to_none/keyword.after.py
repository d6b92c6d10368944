import torch

model = torch.nn.Linear(2, 2)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for _ in range(3):
    opt.zero_grad(set_to_none=True)  # keep buffers
    model(torch.randn(1, 2)).sum().backward()
    opt.step()
