"""Train a tiny regressor."""

import argparse

import torch

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=3)
parser.add_argument("--lr", type=float, default=0.1)
parser.add_argument("--compile_model", action=argparse.BooleanOptionalAction, default=True,
    help="torch.compile the model (added by InfraRSI; --no-compile_model turns it off)")
args = parser.parse_args()

model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1))
model.to("cpu")
if args.compile_model:
    model = torch.compile(model)
optimizer = torch.optim.SGD(model.parameters(), lr=args.lr)

for step in range(args.steps):
    loss = model(torch.randn(8, 4)).pow(2).mean()
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
