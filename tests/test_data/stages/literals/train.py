"""A job whose speed settings are written in its code, not taken from its command: the thread
count, and the loaders' workers (one loader leaves them out, one writes 0)
(tests/knobs/test_literals.py)."""

import argparse

import torch
from torch.utils.data import DataLoader, TensorDataset

parser = argparse.ArgumentParser()
parser.add_argument("--batch_size", type=int, default=16)
parser.add_argument("--max_iters", type=int, default=6)
args = parser.parse_args()

torch.set_num_threads(2)
torch.manual_seed(0)
data = TensorDataset(torch.randn(256, 32), torch.randint(0, 4, (256,)))
loader_kwargs = {"batch_size": args.batch_size}
train_loader = DataLoader(data, **loader_kwargs)
eval_loader = DataLoader(data, batch_size=64, num_workers=0)

model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 4))
optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
it = 0
while it < args.max_iters:
    for x, y in train_loader:
        loss = torch.nn.functional.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        print(f"iter {it} loss {loss.item():.6f} threads {torch.get_num_threads()} workers {train_loader.num_workers}")
        it += 1
        if it == args.max_iters:
            break
