from torch import nn
from torch.optim import SGD


def make(model: nn.Module):
    return SGD(
        model.parameters(),
        lr=0.1,
        momentum=0.9,
    )
