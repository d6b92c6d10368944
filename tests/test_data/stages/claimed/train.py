"""A job whose thread count and batch rows are set through calls the role rules cannot follow (a
name built at run time, a lookup table): init leaves both ``unknown``, the model's claims are
judged by doctor's trials (tests/stages/test_claims.py)."""

import argparse

import torch

parser = argparse.ArgumentParser()
parser.add_argument("--pool", type=int, default=2, help="size of the pool")
parser.add_argument("--rows", type=int, default=256, help="rows per pass")
parser.add_argument("--max_iters", type=int, default=8)
args = parser.parse_args()

getattr(torch, "set_" + "num_threads")(args.pool)
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(512, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 512))
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
data = torch.randn(1024, 512)
settings = {"r": args.rows}

for it in range(args.max_iters):
    x = data[: settings["r"]]
    loss = model(x).pow(2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(f"iter {it} loss {loss.item():.6f}")
