import torch
from torch.utils.data import DataLoader


def get_batch(x, device):
    return x.pin_memory().to(device, non_blocking=True)


def loader(ds, **kw):
    return DataLoader(ds, pin_memory=True), DataLoader(ds, **kw)


def evaluate(model, x, device):
    return model(x.to(device))
