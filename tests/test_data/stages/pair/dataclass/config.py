from dataclasses import dataclass


@dataclass
class TrainConfig:
    micro_batch_size: int = 4  # sequences per forward/backward
    grad_accum: int = 4  # micro-batches per optimizer step
    seq_len: int = 32
    n_layer: int = 1
    n_head: int = 2
    n_embd: int = 32
    vocab_size: int = 128
    learning_rate: float = 3e-3
    num_steps: int = 300
    seed: int = 1337
