"""A job whose thread count and seed are set through calls the role rules cannot follow (names
built at run time): init leaves both ``unknown``, and the model's claims about them are judged by
doctor's trials (tests/stages/test_claims.py)."""

import argparse

import torch

parser = argparse.ArgumentParser()
parser.add_argument("--pool", type=int, default=2, help="size of the pool")
parser.add_argument("--salt", type=int, default=0, help="salt")
parser.add_argument("--max_iters", type=int, default=8)
args = parser.parse_args()

getattr(torch, "set_" + "num_threads")(args.pool)
getattr(torch, "manual_" + "seed")(args.salt)
model = torch.nn.Sequential(torch.nn.Linear(512, 2048), torch.nn.ReLU(), torch.nn.Linear(2048, 512))
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
data = torch.randn(1024, 512)

for it in range(args.max_iters):
    x = data
    loss = model(x).pow(2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(f"iter {it} loss {loss.item():.6f}")
