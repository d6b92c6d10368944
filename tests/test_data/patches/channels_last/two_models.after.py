import torch
from torch import nn

generator = nn.Sequential(nn.ConvTranspose2d(8, 4, 4, 2, 1), nn.ReLU(), nn.Conv2d(4, 3, 3, padding=1))
generator = generator.to(memory_format=torch.channels_last)  # NHWC convolutions (added by InfraRSI)
critic = nn.Sequential(nn.Conv2d(3, 4, 4, 2, 1), nn.Flatten(), nn.LazyLinear(1))
critic = critic.to(memory_format=torch.channels_last)  # NHWC convolutions (added by InfraRSI)
critic(torch.zeros(1, 3, 8, 8))
g_opt = torch.optim.Adam(generator.parameters(), lr=2e-4)
c_opt = torch.optim.Adam(critic.parameters(), lr=2e-4)

for step in range(4):
    fake = generator(torch.randn(2, 8, 4, 4))
    c_loss = critic(fake.detach()).mean()
    c_opt.zero_grad()
    c_loss.backward()
    c_opt.step()
    g_loss = -critic(fake).mean()
    g_opt.zero_grad()
    g_loss.backward()
    g_opt.step()
