"""A learnable synthetic task: a repeating pattern with 10% of the tokens replaced by noise."""

import torch

VOCAB, T = 1024, 128
_gen = torch.Generator().manual_seed(0)
_pattern = torch.randint(VOCAB, (97,), generator=_gen)


def get_batch(batch_size: int):
    start = torch.randint(97, (batch_size,), generator=_gen)
    idx = (start[:, None] + torch.arange(T + 1)) % 97
    seq = _pattern[idx]
    noise = torch.rand(seq.shape, generator=_gen) < 0.1
    seq = torch.where(noise, torch.randint(VOCAB, seq.shape, generator=_gen), seq)
    return seq[:, :-1], seq[:, 1:]
