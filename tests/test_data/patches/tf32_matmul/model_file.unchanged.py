"""A model definition: no training loop here, the setting belongs to the entry point."""
import torch.nn as nn


class M(nn.Module):
    pass
