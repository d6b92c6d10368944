"""The activation bytes one GPU keeps, from the model's shape (Korthikanti et al. 2022, Table 2).

Per token and layer, 16-bit training without parallelism or recomputation keeps 34 + 5as/h bytes a
hidden unit: 10 for the layer norms' inputs and the dropout masks, which every tensor-parallel rank
keeps whole unless sequence parallelism splits them; 24 for the attention's and the MLP's inputs and
inner tensors, split over the t ranks; 5as/h for the attention scores (a heads, s the sequence),
split too, unless a fused kernel (SDPA, FlashAttention) computes the attention and keeps none
(``Workload.attention``). Selective recomputation drops the scores and recomputes them in the backward; full
recomputation keeps each layer's 2-byte input (split by sequence parallelism) and, while a layer
recomputes, that layer's whole set. Under 1F1B the first pipeline stage keeps p micro-batches of its
l/p layers in flight, as many layers' worth as one GPU without a pipeline; interleaving v chunks a
stage keeps 1 + (p-1)/(p·v) times that (Narayanan et al. 2021, Section 2.2). The logits and the
runtime's buffers are left out: the memory model fits what the formula misses (docs/sim.md, "Memory").
"""

from __future__ import annotations

from dataclasses import dataclass

from infrarsi.contract import Contract

NORMS_AND_MASKS, SPLIT_TENSORS, SCORES, LAYER_INPUT = 10.0, 24.0, 5.0, 2.0
"""Table 2's bytes per token and hidden unit: kept whole on every tensor-parallel rank without
sequence parallelism; split over the ranks; the scores' coefficient of a·s/h; full recomputation's input."""


@dataclass(frozen=True, slots=True)
class Shape:
    seq: int
    hidden: int
    heads: int
    layers: int


def model_shape(contract: Contract) -> Shape | None:
    """The shape the formula needs, or None where the contract lacks any of it."""
    w = contract.workload
    if not (w.seq_len and w.hidden and w.heads and w.layers):
        return None
    return Shape(w.seq_len, w.hidden, w.heads, w.layers)


def layers_in_flight(stages: float, chunks: float) -> float:
    """How many layers' worth of micro-batches the first pipeline stage keeps, over the layers."""
    return 1.0 if stages <= 1 or chunks <= 1 else 1.0 + (stages - 1) / (stages * chunks)


def activation_bytes(shape: Shape, *, micro: float, tp: float, sequence_parallel: bool, level: str,
                     pp: float = 1.0, vpp: float = 1.0, fused_attention: bool = False) -> float:
    """Peak activation bytes on the first stage's GPU; ``level`` is off, selective or on (full);
    ``fused_attention``: the scores are never stored."""
    whole = tp if sequence_parallel else 1.0
    kept_whole = NORMS_AND_MASKS / whole + SPLIT_TENSORS / tp
    scores = 0.0 if fused_attention else SCORES * shape.heads * shape.seq / (shape.hidden * tp)
    if level == "on":
        per_layer, working = LAYER_INPUT / whole, kept_whole + scores
    elif level == "selective":
        per_layer, working = kept_whole, scores
    else:
        per_layer, working = kept_whole + scores, 0.0
    tokens = micro * shape.seq * shape.hidden
    return tokens * (shape.layers * per_layer * layers_in_flight(pp, vpp) + working)
