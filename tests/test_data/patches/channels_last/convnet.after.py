import torch
import torch.nn as nn
import torch.nn.functional as F


class SmallConvNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 16, 3, padding=1)
        self.conv2 = nn.Conv2d(16, 32, 3, padding=1)
        self.head = nn.Linear(32, 10)

    def forward(self, x):
        x = F.relu(self.conv1(x))
        x = F.relu(self.conv2(x))
        return self.head(x.mean(dim=(2, 3)))


def main():
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    net = SmallConvNet().to(device)
    net = net.to(memory_format=torch.channels_last)  # NHWC convolutions (added by InfraRSI)
    if torch.cuda.device_count() > 1:
        net = nn.DataParallel(net)
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    for _ in range(10):
        images = torch.randn(8, 3, 32, 32, device=device)
        labels = torch.randint(0, 10, (8,), device=device)
        loss = F.cross_entropy(net(images), labels)
        opt.zero_grad()
        loss.backward()
        opt.step()


if __name__ == "__main__":
    main()
