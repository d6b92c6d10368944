import torch.nn as nn


class Net(nn.Module):
    def __init__(self, n_layer):
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(64, 64) for _ in range(n_layer))
