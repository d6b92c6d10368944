import contextlib

import torch
from torch.nn.parallel import DistributedDataParallel

from infrarsi import probe


def train(model, batches, optimizer, grad_accum_steps):
    model = DistributedDataParallel(model)
    for xb, yb in batches:
        for micro in range(grad_accum_steps):
            # DDP all-reduces the accumulated gradients once, on the last micro-step
            with model.no_sync() if micro < grad_accum_steps - 1 and hasattr(model, "no_sync") else contextlib.nullcontext():
                with probe.phase("forward"):
                    loss = torch.nn.functional.mse_loss(model(xb[micro]), yb[micro]) / grad_accum_steps
                with probe.phase("backward"):
                    loss.backward()
        optimizer.step()
        optimizer.zero_grad()
