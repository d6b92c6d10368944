"""Train a tiny classifier; the command line is click's."""
import click
import torch
from torch.utils.data import DataLoader, TensorDataset


@click.group()
def cli():
    pass


@cli.command()
@click.argument("data_dir")
@click.option("--batch-size", "-b", default=32, type=int, show_default=True, help="examples per forward pass")
@click.option("--accum-steps", default=2, type=int, help="micro-batches per optimizer step")
@click.option("--lr", default=1e-3, type=float)
@click.option("--steps", "max_steps", default=100, type=click.IntRange(1, None))
@click.option("--threads", default=2, type=int, help="torch intra-op threads")
@click.option("--workers", default=0)
@click.option("--compile/--no-compile", default=False, help="torch.compile the model")
@click.option("--verbose", is_flag=True)
@click.option("--dtype", type=click.Choice(["float32", "bfloat16"]), default="float32")
@click.option("--tags", multiple=True)
def train(data_dir, batch_size, accum_steps, lr, max_steps, threads, workers, compile, verbose, dtype, tags):
    torch.set_num_threads(threads)
    data = TensorDataset(torch.randn(512, 16), torch.randint(0, 4, (512,)))
    loader = DataLoader(data, batch_size=batch_size, num_workers=workers, shuffle=True)
    model = torch.nn.Linear(16, 4)
    if compile:
        model = torch.compile(model)
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    batches = iter(loader)
    for step in range(max_steps):
        for _ in range(accum_steps):
            x, y = next(batches)
            loss = torch.nn.functional.cross_entropy(model(x), y) / accum_steps
            loss.backward()
        opt.step()
        opt.zero_grad()
        if verbose:
            print(step, loss.item())


@cli.command()
@click.option("--checkpoint", default="out.pt")
def evaluate(checkpoint):
    print(checkpoint)


if __name__ == "__main__":
    cli()
