import torch.nn as nn


class Decoder(nn.Module):
    def __init__(self, layers):
        super().__init__()
        self.layers = nn.ModuleList(layers)

    def forward(self, x, caches):
        for layer, cache in zip(self.layers, caches):
            x = layer(x, cache)
        for layer in self.layers:
            x, _ = layer(x)
        return x
