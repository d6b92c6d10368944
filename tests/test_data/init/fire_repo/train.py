"""Train a tiny classifier; the command line is python-fire's."""
import fire
import torch
from torch.utils.data import DataLoader, TensorDataset


class Trainer:
    def __init__(self, batch_size=32, accum_steps: int = 2, lr: float = 1e-3, max_steps=100, threads=2,
                 compile=False, run_name="baseline", device=None):
        self.batch_size = batch_size
        self.accum_steps = accum_steps
        self.lr = lr
        self.max_steps = max_steps
        self.compile = compile
        torch.set_num_threads(threads)

    def train(self):
        data = TensorDataset(torch.randn(512, 16), torch.randint(0, 4, (512,)))
        loader = DataLoader(data, batch_size=self.batch_size, shuffle=True)
        model = torch.nn.Linear(16, 4)
        if self.compile:
            model = torch.compile(model)
        opt = torch.optim.SGD(model.parameters(), lr=self.lr)
        batches = iter(loader)
        for _ in range(self.max_steps):
            for _ in range(self.accum_steps):
                x, y = next(batches)
                loss = torch.nn.functional.cross_entropy(model(x), y) / self.accum_steps
                loss.backward()
            opt.step()
            opt.zero_grad()


if __name__ == "__main__":
    fire.Fire(Trainer)
