"""Train a tiny classifier; the command line is typer's."""
from typing import Annotated, Optional

import torch
import typer
from torch.utils.data import DataLoader, TensorDataset

app = typer.Typer()


@app.command()
def main(
    data_dir: str,
    batch_size: int = 32,
    accum_steps: Annotated[int, typer.Option(help="micro-batches per optimizer step")] = 2,
    lr: float = typer.Option(1e-3, "--learning-rate", help="the optimizer's step size"),
    max_steps: int = 100,
    threads: int = 2,
    compile: bool = False,
    resume: Optional[str] = None,
):
    torch.set_num_threads(threads)
    data = TensorDataset(torch.randn(512, 16), torch.randint(0, 4, (512,)))
    loader = DataLoader(data, batch_size=batch_size, shuffle=True)
    model = torch.nn.Linear(16, 4)
    if compile:
        model = torch.compile(model)
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    batches = iter(loader)
    for _ in range(max_steps):
        for _ in range(accum_steps):
            x, y = next(batches)
            loss = torch.nn.functional.cross_entropy(model(x), y) / accum_steps
            loss.backward()
        opt.step()
        opt.zero_grad()


if __name__ == "__main__":
    app()
