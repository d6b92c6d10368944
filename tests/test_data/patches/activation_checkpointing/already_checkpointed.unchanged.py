import torch.nn as nn
from torch.utils.checkpoint import checkpoint


class Stack(nn.Module):
    def __init__(self, layers, ckpt):
        super().__init__()
        self.layers = nn.ModuleList(layers)
        self.ckpt = ckpt

    def forward(self, x):
        for layer in self.layers:
            if self.ckpt:
                x = checkpoint(layer, x, use_reentrant=False)
            else:
                x = layer(x)
        return x

    def generate(self, x):
        for layer in self.layers:
            x = layer(x)
        return x
