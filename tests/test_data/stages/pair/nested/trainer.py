"""The training loop; its settings live in the node ``Trainer.get_default_config`` builds."""

import numpy as np
import torch

from config import Node


class Trainer:
    @staticmethod
    def get_default_config():
        C = Node()
        C.batch_size = 4  # sequences per forward/backward
        C.accumulate = 4  # forward/backward passes per optimizer step
        C.max_iters = 300
        C.learning_rate = 3e-3
        return C

    def __init__(self, config, model, corpus, block_size):
        self.config, self.model, self.corpus, self.block_size = config, model, corpus, block_size

    def batches(self, generator):
        while True:
            ix = torch.randint(len(self.corpus) - self.block_size, (self.config.batch_size,), generator=generator)
            x = torch.stack([torch.from_numpy(self.corpus[i:i + self.block_size].astype(np.int64)) for i in ix])
            y = torch.stack([torch.from_numpy(self.corpus[i + 1:i + 1 + self.block_size].astype(np.int64)) for i in ix])
            yield x, y

    def run(self, seed):
        print(f"{self.config.accumulate} passes of {self.config.batch_size} sequences per step")
        optimizer = torch.optim.AdamW(self.model.parameters(), lr=self.config.learning_rate)
        data = self.batches(torch.Generator().manual_seed(seed))
        for it in range(self.config.max_iters):
            for _ in range(self.config.accumulate):
                x, y = next(data)
                _, loss = self.model(x, y)
                loss = loss / self.config.accumulate
                loss.backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            print(f"iter {it} loss {loss.item() * self.config.accumulate:.4f}")
