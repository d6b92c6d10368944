import torch
from torch.utils.data import DataLoader, TensorDataset

dataset = TensorDataset(torch.randn(64, 4), torch.randn(64, 1))
loader = DataLoader(dataset, batch_size=8, shuffle=True, num_workers=2, pin_memory=True)


def next_batch(it):
    xb, yb = next(it)
    return xb.pin_memory().cuda(non_blocking=True), yb.to(torch.float32)
