import torch

for step in range(100):
    for micro in range(4):
        batch = next(batches)

        # forward
        out, loss = net(batch)
        loss = loss / 4
        loss.backward()
    opt.step()
