"""Defines a convolutional model; the training loop lives in another file."""
from torch import nn


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 8, 3)

    def forward(self, x):
        return self.conv(x)
