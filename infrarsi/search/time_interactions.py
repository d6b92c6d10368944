"""What sharding does to the step time together with the micro-batch.

ZeRO 2 reduce-scatters the gradients after every micro-batch's backward, and ZeRO 3 also gathers
the weights for every micro-batch's forward and backward (Rajbhandari et al. 2020; FSDP's
``SHARD_GRAD_OP`` and ``FULL_SHARD`` alike): that traffic is per micro-batch, while the compute it
hides behind is per sample, so its share of the step grows as the micro-batch shrinks. A model
additive in the settings gives the stage one effect and the micro-batch another, and puts what
the two do together on whatever else changed with them: in the 175B traces of docs/benchmarks.md
("The activations' interaction"), selective recomputation was blamed for ZeRO 3 at micro-batch 2.

What moves is the parameters a GPU shares with other data-parallel ranks: its stage's dense ones
when d = GPUs/(tp·pp) > 1, and its 1/ep of the experts when d/ep > 1, while its compute is the same
share of the model's whatever ep is (its experts take the tokens of ep ranks). With every expert
on its own GPU (ep = d) an MoE moves only its dense tenth each micro-batch.

The time model (``TimeModel``) adds one column per such stage in the space: the candidate's being
at that stage, times its micro-batches per sample over the baseline's (at the baseline's
micro-batch, the stage's indicator; at half of it, twice that), times the share of its parameters
that moves (``moved_share``). Its weight, the traffic's log share of the step
at the baseline's micro-batch, is learned like a setting's effect, with mean 0 and a wide sd; the
stage's own prior stays on the stage's setting for what does not repeat per micro-batch. Written
as the stage's effect plus a correction that vanishes at the baseline's micro-batch instead, the
same span with the stage's narrow prior on the first term, it could not learn from trials at
micro-batches 2 and 4 what micro-batch 1 costs (tests/search/test_time_interactions.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from infrarsi.contract import Contract, KnobValue
from infrarsi.priors.memory_parts import layout, sharding_stage, value_ratio
from infrarsi.search.layout_table import LayoutTable, layout_table
from infrarsi.search.space import SearchSpace
from infrarsi.settings import setting_key

if TYPE_CHECKING:  # importing it imports torch
    from infrarsi.records.hardware import HardwareFingerprint

PER_MICRO_BATCH_STAGES = ("2", "3")
"""ZeRO stages whose traffic repeats every micro-batch (ZeRO 0 and 1 reduce once per step)."""
WEIGHT_SD = 0.25
"""The prior sd of a column's weight: the traffic's share of a small micro-batch's step runs from a
few percent inside an NVLink node to more than the compute across nodes (docs/sim.md), so the
trials, not a prior, must set it."""


@dataclass(frozen=True, slots=True)
class TimeInteractions:
    """Columns the time model adds to the setting indicators."""

    stage: np.ndarray
    """(settings, columns): what a setting changes in a candidate's being at each column's stage."""
    stage_base: np.ndarray
    """(columns,): 1 where the baseline is at the column's stage."""
    micro: np.ndarray
    """(settings,): what a micro-batch setting changes in the micro-batches per sample over the
    baseline's (1 at the baseline)."""
    moved: LayoutTable | None
    """The share of the parameters that moves, per layout (None: the space has no layout knob)."""
    moved_base: float
    """That share at the baseline's layout."""

    def features(self, indicator: np.ndarray) -> np.ndarray:
        """(candidates, columns) from the candidates' setting indicators."""
        moved = self.moved.at(indicator) if self.moved is not None else np.full(len(indicator), self.moved_base)
        return (self.stage_base + indicator @ self.stage) * ((1 + indicator @ self.micro) * moved)[:, None]

    def inputs(self, indicator: np.ndarray) -> np.ndarray:
        """The columns as the time model's GP takes them: scaled by their weights' prior sd (their
        prior mean is 0)."""
        return self.features(indicator) * WEIGHT_SD


def moved_share(values: Mapping[str, KnobValue], hw: HardwareFingerprint, contract: Contract) -> float:
    """The share of one GPU's parameters that ZeRO 2/3 moves each micro-batch, at the layout
    ``values`` (the rest at the baseline's); 0 where the values are no layout."""
    at = layout(values, hw, contract)
    if at is None:
        return 0.0
    return (1 - at.experts) * (at.dp > 1) + at.experts / at.ep * (at.dp / at.ep > 1)


def time_interactions(space: SearchSpace, hw: HardwareFingerprint, contract: Contract) -> TimeInteractions | None:
    """The columns for ``space`` on ``hw``; None off a GPU, without a sharding knob with a
    per-micro-batch stage, or without a micro-batch (or, lacking one, accumulation) knob."""
    if hw.device != "cuda" or not hw.gpu_count:
        return None
    shard = next((k for k in space.knobs if k.role == "fsdp"), None)
    micro = next((k for k in space.knobs if k.role == "micro_batch"), None)
    accum = None if micro is not None else next((k for k in space.knobs if k.role == "grad_accum"), None)
    if shard is None or (micro is None and accum is None):
        return None
    stages = [s for s in PER_MICRO_BATCH_STAGES if any(sharding_stage(v) == s for v in [shard.default, *shard.domain])]
    if not stages:
        return None
    index = {key: i for i, key in enumerate(space.setting_keys)}
    n = len(space.setting_keys)
    base = np.array([1.0 if sharding_stage(shard.default) == s else 0.0 for s in stages])
    stage, per_sample = np.zeros((n, len(stages))), np.zeros(n)
    for value in shard.domain:
        i = index.get(setting_key(shard.name, value))
        if i is not None:
            stage[i] = np.array([1.0 if sharding_stage(value) == s else 0.0 for s in stages]) - base
    knob = micro if micro is not None else accum
    for value in knob.domain:
        i, r = index.get(setting_key(knob.name, value)), value_ratio(knob, value)
        if i is not None and r is not None:
            per_sample[i] = (1 / r if knob is micro else r) - 1
    if not per_sample.any():
        return None
    return TimeInteractions(stage, base, per_sample, layout_table(space, lambda values: moved_share(values, hw, contract)),
                            moved_share({}, hw, contract))
