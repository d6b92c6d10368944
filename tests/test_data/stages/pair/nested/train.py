"""A job configured by a node built in code and overridden from its command
(``python train.py --trainer.batch_size=8 --trainer.accumulate=2``)."""

import sys

import torch

from config import Node
from data import make_corpus
from model import GPT, GPTConfig
from trainer import Trainer


def get_config():
    C = Node()
    C.system = Node()
    C.system.seed = 1337
    C.model = Node()
    C.model.n_layer = 1
    C.model.n_head = 2
    C.model.n_embd = 32
    C.model.block_size = 32
    C.model.vocab_size = 128
    C.trainer = Trainer.get_default_config()
    return C


config = get_config()
config.merge_from_args(sys.argv[1:])
torch.manual_seed(config.system.seed)
model = GPT(GPTConfig(block_size=config.model.block_size, vocab_size=config.model.vocab_size,
                      n_layer=config.model.n_layer, n_head=config.model.n_head, n_embd=config.model.n_embd))
Trainer(config.trainer, model, make_corpus(config.model.vocab_size), config.model.block_size).run(config.system.seed)
