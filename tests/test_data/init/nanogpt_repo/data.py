"""
A synthetic corpus in place of nanoGPT's prepared train.bin / val.bin, so nothing is downloaded:
short fixed token patterns ("motifs") one after another in random order, with some noise.
"""

import numpy as np


def make_corpus(vocab_size, n_tokens=200_000, n_motifs=64, motif_len=16, noise=0.1, seed=1337):
    """The token stream as a uint16 array, like nanoGPT's train.bin."""
    rng = np.random.default_rng(seed)
    motifs = rng.integers(0, vocab_size, size=(n_motifs, motif_len))
    order = rng.integers(0, n_motifs, size=n_tokens // motif_len + 1)
    stream = motifs[order].reshape(-1)[:n_tokens]
    noisy = rng.random(n_tokens) < noise
    stream[noisy] = rng.integers(0, vocab_size, size=int(noisy.sum()))
    return stream.astype(np.uint16)
