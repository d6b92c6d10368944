"""No probe: a training loop with a log format of its own, which InfraRSI does not read."""

import argparse
import time

import torch

parser = argparse.ArgumentParser()
parser.add_argument("--max_iters", type=int, default=10)
parser.add_argument("--batch_size", type=int, default=4)
parser.add_argument("--block_size", type=int, default=8)
args = parser.parse_args()

model = torch.nn.Embedding(256, 4)
optimizer = torch.optim.SGD(model.parameters(), lr=0.0)
print("compiling... done")
for it in range(args.max_iters):
    t0 = time.time()
    time.sleep(0.03)
    tokens = torch.zeros(args.batch_size, args.block_size, dtype=torch.long)
    loss = model(tokens).sum() * 0 + 4.0 * 0.9**it
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    print(f"[{time.strftime('%H:%M:%S')}] step {it:>4d} | loss={loss.item():.4f} | {(time.time() - t0) * 1000:.1f} ms/it")
