import torch

from config import TrainConfig
from model import Net


def train(cfg: TrainConfig) -> None:
    torch.manual_seed(cfg.seed)
    torch.set_num_threads(cfg.num_threads)
    model = Net(cfg.n_layer)
    opt = torch.optim.SGD(model.parameters(), lr=cfg.learning_rate)
    step = 0
    while step < cfg.num_steps:
        x = torch.randn(cfg.global_batch_size, cfg.seq_len, 64)
        out = model.layers[0](x)
        loss = out.pow(2).mean()
        loss.backward()
        opt.step()
        opt.zero_grad()
        step += 1


if __name__ == "__main__":
    train(TrainConfig())
