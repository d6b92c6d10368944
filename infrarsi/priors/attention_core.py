"""What the attention core weighs in a transformer layer: the part selective recomputation drops
from memory and recomputes in the backward (Korthikanti et al. 2022). Both grow with the sequence
over the head width, so the priors read them from the contract's shape where it is known."""

from __future__ import annotations

import math

from infrarsi.contract import Contract
from infrarsi.knobs.attention import FUSED

HEAD_DIM = 128
"""An attention head's width where the model's is not known (Llama 2's, GPT-3's and Mixtral's)."""
SCORES_SD = 0.3
"""Spread of the scores' share in log when the head width is assumed: half or twice 128 moves it by 0.3-0.6."""
SCORES_KNOWN_SD = 0.15
"""...and when the model's is known: the other 34 bytes vary with the MLP's and the key/value heads' widths."""
MEMORY_BOUND_COST = 14.0
"""The softmax, dropout and masking of the scores run at memory speed: their recomputation costs
this times s/(h·h_d) of a step, beyond the core's FLOPs (Korthikanti et al. 2022, Table 4: the 22B
model, h 6144, 64 heads, s 2048, A100: selective recomputation 20.9 ms a layer against 19.6, +6.6 %,
of which the core's FLOPs are 1.75 %)."""
SELECTIVE_TIME_SD = 0.05


def head_dim(contract: Contract) -> tuple[float, bool]:
    """The head width and whether the model's own (its hidden size over its heads) or assumed."""
    w = contract.workload
    if w.hidden and w.heads:
        return w.hidden / w.heads, True
    return HEAD_DIM, False


FUSED_SAVING_SD = 0.05
"""Selective recomputation under a fused attention kernel: no scores to drop, so its saving is
nothing, give or take the kernel's small saved statistics (the softmax's log-sum-exp)."""


def scores_saving(contract: Contract) -> tuple[float, float] | None:
    """Selective recomputation's log effect on the activations, and its sd: it drops the scores'
    5as/h = 5s/h_d of a layer's 34 + 5s/h_d bytes per token and hidden unit (Table 2); nothing
    where a fused kernel keeps no scores (``Workload.attention``). None without a sequence length."""
    seq = contract.workload.seq_len
    if contract.workload.attention == FUSED:
        return 0.0, FUSED_SAVING_SD
    if not seq:
        return None
    width, known = head_dim(contract)
    return -math.log1p(5 * seq / (34 * width)), SCORES_KNOWN_SD if known else SCORES_SD


def selective_time(contract: Contract) -> float | None:
    """Selective recomputation's log effect on the step against none: the core's forward again,
    s/(6h + s) of a layer's forward FLOPs and a third of that of a step's, plus its memory-bound
    work (``MEMORY_BOUND_COST``), which a fused kernel does inside its FLOPs. None unless the
    sequence length and the hidden size are known: 2.7 % for GPT-3 175B at 2,048 tokens, 16 % for
    Llama 2 7B at 4,096."""
    w = contract.workload
    if not (w.seq_len and w.hidden):
        return None
    s, h = w.seq_len, w.hidden
    memory_bound = 0.0 if w.attention == FUSED else MEMORY_BOUND_COST * s / (h * head_dim(contract)[0])
    return math.log1p(s / (3 * (6 * h + s)) + memory_bound)
