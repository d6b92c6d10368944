"""The training loop; its settings live in the node ``Trainer.get_default_config`` builds."""

import torch
from torch.utils.data import DataLoader

from config import Node


class Trainer:
    @staticmethod
    def get_default_config():
        C = Node()
        C.num_workers = 2
        C.batch_size = 16
        C.max_iters = 1000
        C.learning_rate = 3e-4
        return C

    def __init__(self, config, model, dataset):
        self.config, self.model, self.dataset = config, model, dataset

    def run(self):
        loader = DataLoader(self.dataset, batch_size=self.config.batch_size, num_workers=self.config.num_workers)
        optimizer = torch.optim.AdamW(self.model.parameters(), lr=self.config.learning_rate)
        it = 0
        while it < self.config.max_iters:
            for x, y in loader:
                loss = torch.nn.functional.cross_entropy(self.model(x), y)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                print(f"iter {it} loss {loss.item():.6f} workers {loader.num_workers}")
                it += 1
                if it >= self.config.max_iters:
                    return
