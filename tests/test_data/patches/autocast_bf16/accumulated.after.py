import torch

for step in range(100):
    for micro in range(4):
        with torch.autocast(device_type="cuda" if torch.cuda.is_available() else "cpu", dtype=torch.bfloat16):
            batch = next(batches)

            # forward
            out, loss = net(batch)
            loss = loss / 4
        loss.backward()
    opt.step()
