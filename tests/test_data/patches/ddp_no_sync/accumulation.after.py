import os
from contextlib import nullcontext

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

ddp = int(os.environ.get("RANK", -1)) != -1
if ddp:
    dist.init_process_group("gloo")
model = torch.nn.Linear(8, 1)
if ddp:
    model = DDP(model)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
accum = 4

for it in range(3):
    for micro_step in range(accum):
        x = torch.randn(2, 8)
        # DDP all-reduces the accumulated gradients once, on the last micro-step
        with model.no_sync() if micro_step < accum - 1 and hasattr(model, "no_sync") else nullcontext():
            loss = model(x).pow(2).mean() / accum
            # backward accumulates into .grad
            loss.backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
