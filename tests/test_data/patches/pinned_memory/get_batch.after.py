import numpy as np
import torch

device = "cuda"
data = np.arange(1000, dtype=np.int64)


def get_batch(batch_size=4, block_size=8):
    ix = torch.randint(len(data) - block_size, (batch_size,))
    x = torch.stack([torch.from_numpy(data[i:i + block_size]) for i in ix])
    y = torch.stack([torch.from_numpy(data[i + 1:i + 1 + block_size]) for i in ix])
    x, y = x.pin_memory().to(device, non_blocking=True), y.pin_memory().to(device, non_blocking=True)
    return x, y
