"""What sharding does to the step time together with the micro-batch.

ZeRO 2 reduce-scatters the gradients after every micro-batch's backward, and ZeRO 3 also gathers
the weights for every micro-batch's forward and backward (Rajbhandari et al. 2020; FSDP's
``SHARD_GRAD_OP`` and ``FULL_SHARD`` alike): that traffic is per micro-batch, while the compute it
hides behind is per sample, so its share of the step grows as the micro-batch shrinks. A model
additive in the settings gives the stage one effect and the micro-batch another, and puts what
the two do together on whatever else changed with them: in the 175B traces of docs/benchmarks.md
("The activations' interaction"), selective recomputation was blamed for ZeRO 3 at micro-batch 2.

The time model (``TimeModel``) adds one column per such stage in the space: the candidate's being
at that stage times its micro-batches per sample over the baseline's (at the baseline's micro-batch,
the stage's indicator; at half of it, twice that). Its weight, the traffic's log share of the step
at the baseline's micro-batch, is learned like a setting's effect, with mean 0 and a wide sd; the
stage's own prior stays on the stage's setting for what does not repeat per micro-batch. Written
as the stage's effect plus a correction that vanishes at the baseline's micro-batch instead, the
same span with the stage's narrow prior on the first term, it could not learn from trials at
micro-batches 2 and 4 what micro-batch 1 costs (tests/search/test_time_interactions.py).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from infrarsi.priors.memory_parts import sharding_stage, value_ratio
from infrarsi.search.space import SearchSpace
from infrarsi.settings import setting_key

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

    def features(self, indicator: np.ndarray) -> np.ndarray:
        """(candidates, columns) from the candidates' setting indicators."""
        return (self.stage_base + indicator @ self.stage) * (1 + indicator @ self.micro)[:, None]

    def inputs(self, indicator: np.ndarray) -> np.ndarray:
        """The columns as the time model's GP takes them: scaled by their weights' prior sd (their
        prior mean is 0)."""
        return self.features(indicator) * WEIGHT_SD


def time_interactions(space: SearchSpace) -> TimeInteractions | None:
    """The columns for ``space``; None without a sharding knob with a per-micro-batch stage, or
    without a micro-batch (or, lacking one, accumulation) knob."""
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
    return TimeInteractions(stage, base, per_sample)
