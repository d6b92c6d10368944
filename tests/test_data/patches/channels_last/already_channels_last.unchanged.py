import torch

model = torch.nn.Conv2d(3, 8, 3).to(memory_format=torch.channels_last)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for _ in range(3):
    x = torch.randn(2, 3, 16, 16).contiguous(memory_format=torch.channels_last)
    loss = model(x).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
