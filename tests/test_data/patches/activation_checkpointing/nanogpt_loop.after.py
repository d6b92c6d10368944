"""A GPT whose forward runs its blocks in a loop."""

import torch
import torch.nn as nn
import torch.utils.checkpoint

activation_checkpointing = True  # recompute each block in backward instead of storing its activations (added by InfraRSI)


class Block(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.ln = nn.LayerNorm(d)
        self.fc = nn.Linear(d, d)
        self.drop = nn.Dropout(0.1)

    def forward(self, x):
        return x + self.drop(self.fc(self.ln(x)))


class GPT(nn.Module):
    def __init__(self, d=16, n_layer=3):
        super().__init__()
        self.transformer = nn.ModuleDict(dict(h=nn.ModuleList([Block(d) for _ in range(n_layer)])))
        self.head = nn.Linear(d, 1)

    def init_weights(self):
        for block in self.transformer.h:
            block.fc.reset_parameters()

    def forward(self, x):
        for block in self.transformer.h:
            if activation_checkpointing:
                x = torch.utils.checkpoint.checkpoint(block, x, use_reentrant=False)
            else:
                x = block(x)  # residual stream
        return self.head(x)
