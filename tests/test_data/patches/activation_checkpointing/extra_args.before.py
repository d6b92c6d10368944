import torch.nn as nn


class Encoder(nn.Module):
    def __init__(self, layers):
        super().__init__()
        self.layers = nn.ModuleList(layers)

    def forward(self, h, mask=None):
        for layer in self.layers:
            h = layer(h, mask, scale=0.5)
        return h
