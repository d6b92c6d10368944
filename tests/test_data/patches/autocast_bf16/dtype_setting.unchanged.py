from contextlib import nullcontext

import torch

amp = nullcontext() if args.precision == "fp32" else torch.autocast(device_type="cpu", dtype=torch.bfloat16)
for step in range(10):
    with amp:
        loss = model(x)
    loss.backward()
