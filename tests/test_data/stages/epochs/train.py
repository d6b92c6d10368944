"""A job counted in epochs, as many real ones are: no step count, `--epochs` passes over a
DataLoader of 96 rows in batches of 8 (12 batches an epoch), two batches accumulated per
optimizer step, so 6 optimizer steps an epoch."""

import argparse

import torch
from torch.utils.data import DataLoader, TensorDataset


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=5, help="number of epochs to train")
    parser.add_argument("--batch-size", type=int, default=8, help="input batch size for training")
    parser.add_argument("--seed", type=int, default=1, help="random seed")
    args = parser.parse_args()

    torch.manual_seed(args.seed)
    x = torch.randn(96, 16)
    y = x @ torch.randn(16, 1)
    loader = DataLoader(TensorDataset(x, y), batch_size=args.batch_size)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    for epoch in range(args.epochs):
        for i, (inputs, target) in enumerate(loader):
            loss = torch.nn.functional.mse_loss(model(inputs), target) / 2
            loss.backward()
            if i % 2 == 1:
                optimizer.step()
                optimizer.zero_grad()
        print(f"epoch {epoch}: loss {loss.item():.4f}", flush=True)


if __name__ == "__main__":
    main()
