"""Batch geometry: micro-batch × accumulation steps × ranks = the global batch.

The global batch is part of the workload (the contract fixes it); the micro-batch, the
accumulation and the number of processes are how one run splits it. Init derives the global
batch from the split, the catalog and the search space choose splits that keep it, doctor picks
another split of it to measure float reassociation.
"""

from __future__ import annotations


def global_batch(micro: int, accum: int = 1, ranks: int = 1) -> int:
    return micro * accum * ranks


def per_rank(batch: int, ranks: int = 1) -> int:
    """The sequences one process handles per step (micro-batch × accumulation)."""
    return batch // ranks


def accumulation(batch: int, micro: int, ranks: int = 1, over_ranks: bool = False) -> int:
    """The accumulation steps that make ``micro`` on ``ranks`` processes the global batch.
    ``over_ranks``: the script divides its count by the process count (nanoGPT), so the count
    covers every rank and does not depend on ``ranks``."""
    return batch // global_batch(micro, 1, 1 if over_ranks else ranks)


def keeps(batch: int, micro: int, accum: int = 1, ranks: int = 1, over_ranks: bool = False) -> bool:
    """Whether the split is exactly the global batch (with ``over_ranks``, a count the ranks share
    evenly: the script asserts that they do)."""
    if over_ranks:
        return accum % ranks == 0 and global_batch(micro, accum) == batch
    return global_batch(micro, accum, ranks) == batch


def divides(batch: int, micro: int, ranks: int = 1) -> bool:
    """Whether some whole accumulation count completes the split (a script that derives its own)."""
    return batch % global_batch(micro, 1, ranks) == 0
