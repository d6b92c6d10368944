"""A job configured by a node built in code and overridden from its command
(``python train.py --trainer.max_iters=12``): tests/knobs/test_nested.py."""

import sys

import torch
from torch.utils.data import TensorDataset

from config import Node
from trainer import Trainer


def get_config():
    C = Node()
    C.system = Node()
    C.system.seed = 7
    C.model = Node()
    C.model.width = 64
    C.trainer = Trainer.get_default_config()
    C.trainer.learning_rate = 1e-3
    return C


config = get_config()
config.merge_from_args(sys.argv[1:])
torch.manual_seed(config.system.seed)
data = TensorDataset(torch.randn(512, 32), torch.randint(0, 4, (512,)))
model = torch.nn.Sequential(torch.nn.Linear(32, config.model.width), torch.nn.ReLU(), torch.nn.Linear(config.model.width, 4))
Trainer(config.trainer, model, data).run()
