from dataclasses import dataclass

import torch.nn as nn


@dataclass
class GPTConfig:
    block_size: int = 256
    vocab_size: int = 1024
    n_layer: int = 4
    n_embd: int = 128
    n_expert: int = 4


class GPT(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.config = config
        self.lm_head = nn.Linear(config.n_embd, config.vocab_size)
