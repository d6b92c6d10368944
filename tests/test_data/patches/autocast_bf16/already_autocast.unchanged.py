import torch

for step in range(10):
    with torch.autocast("cuda", enabled=use_amp):
        logits = model(x)
        loss = criterion(logits, y)
    scaler.scale(loss).backward()
