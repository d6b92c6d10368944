"""A Hydra job: settings from conf/config.yaml, overridden on the command as
``trainer.max_iters=30`` (tests/knobs/test_nested.py reads it; nothing here is run)."""

import hydra
import torch
from torch.utils.data import DataLoader, TensorDataset


@hydra.main(version_base=None, config_path="conf", config_name="config")
def main(cfg):
    torch.manual_seed(cfg.seed)
    data = TensorDataset(torch.randn(256, 32), torch.randint(0, 4, (256,)))
    loader = DataLoader(data, batch_size=cfg.trainer.batch_size, num_workers=cfg.trainer.num_workers)
    model = torch.nn.Sequential(torch.nn.Linear(32, cfg.model.width), torch.nn.Dropout(cfg.model.dropout),
                                torch.nn.ReLU(), torch.nn.Linear(cfg.model.width, 4))
    optimizer = torch.optim.SGD(model.parameters(), lr=cfg.trainer.lr)
    it = 0
    while it < cfg.trainer.max_iters:
        for x, y in loader:
            loss = torch.nn.functional.cross_entropy(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            it += 1
            if it >= cfg.trainer.max_iters:
                return


if __name__ == "__main__":
    main()
