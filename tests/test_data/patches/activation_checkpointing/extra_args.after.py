import torch.nn as nn
import torch.utils.checkpoint

activation_checkpointing = True  # recompute each block in backward instead of storing its activations (added by InfraRSI)


class Encoder(nn.Module):
    def __init__(self, layers):
        super().__init__()
        self.layers = nn.ModuleList(layers)

    def forward(self, h, mask=None):
        for layer in self.layers:
            if activation_checkpointing:
                h = torch.utils.checkpoint.checkpoint(layer, h, mask, scale=0.5, use_reentrant=False)
            else:
                h = layer(h, mask, scale=0.5)
        return h
