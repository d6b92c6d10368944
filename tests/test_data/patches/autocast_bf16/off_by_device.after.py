from contextlib import nullcontext

import torch

kind = "cuda" if torch.cuda.is_available() else "cpu"
amp = torch.amp.autocast(device_type=kind, dtype=torch.bfloat16)
for step in range(10):
    with amp:
        loss = model(x)
    loss.backward()
