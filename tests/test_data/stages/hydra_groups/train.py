"""A Hydra job composed from config groups: conf/config.yaml's defaults list selects
conf/<group>/<option>.yaml, overridden on the command as ``optimizer.lr=0.01`` and chosen as
``model=large`` (tests/knobs/test_nested.py reads it; nothing here is run)."""

import hydra
import torch
from torch.utils.data import DataLoader, TensorDataset


@hydra.main(version_base=None, config_path="conf", config_name="config")
def main(cfg):
    torch.manual_seed(cfg.seed)
    data = TensorDataset(torch.randn(256, 32), torch.randint(0, 4, (256,)))
    loader = DataLoader(data, batch_size=cfg.trainer.batch_size, num_workers=cfg.trainer.num_workers)
    model = torch.nn.Sequential(torch.nn.Linear(32, cfg.net.width), torch.nn.Dropout(cfg.net.dropout),
                                torch.nn.ReLU(), torch.nn.Linear(cfg.net.width, 4))
    optimizer = torch.optim.AdamW(model.parameters(), lr=cfg.optimizer.lr, weight_decay=cfg.optimizer.weight_decay)
    it = 0
    while it < cfg.trainer.max_iters:
        for x, y in loader:
            loss = torch.nn.functional.cross_entropy(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            if it % cfg.trainer.log_every == 0:
                print(f"iter {it} loss {loss.item():.6f}")
            it += 1
            if it >= cfg.trainer.max_iters:
                return


if __name__ == "__main__":
    main()
