import torch


def batches(vocab_size, batch_size, block_size, seed):
    g = torch.Generator().manual_seed(seed)
    while True:
        x = torch.randint(vocab_size, (batch_size, block_size + 1), generator=g)
        yield x[:, :-1], x[:, 1:]
