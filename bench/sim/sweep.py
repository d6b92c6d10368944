"""A DeepSpeed-autotuning-style sweep: ZeRO stage x micro-batch, every other knob as the job has it.

DeepSpeed's autotuner (its documentation, "Autotuning") tunes the ZeRO stage and the micro-batch
per GPU: for each stage in turn it raises the micro-batch until it no longer fits, then keeps the
fastest measured configuration. ``ZeroMicroSweep`` does that over a ``SimSpace``: stages 0 to 3
(those the space allows with the baseline's other knobs), micro-batches from the smallest up, a
stage left at its first out-of-memory micro-batch; a configuration the space does not allow is
skipped. It never changes the parallel degrees, recomputation or sequence parallelism.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

from bench.sim.space import MICRO, ZERO
from infrarsi.search.history import measured_keys
from infrarsi.search.sampler import Proposal, Sampler
from infrarsi.search.space import SearchSpace
from infrarsi.search.strategy import PreparedStrategy, Strategy
from infrarsi.trials import Candidate, TrialResult, TrialStatus


class ZeroMicroSweep(Sampler):
    def __init__(self, space: SearchSpace):
        self.space = space
        base = space.baseline()
        micro = next(k for k in space.knobs if k.name == MICRO)
        zero = next(k for k in space.knobs if k.name == ZERO)
        self.grid = [[c for m in sorted(micro.domain) if space.is_valid(c := Candidate(knobs={**base.knobs, ZERO: z,
                                                                                               MICRO: m}))]
                     for z in sorted(zero.domain)]

    def ask(self, history: list[TrialResult]) -> Proposal | None:
        measured = measured_keys(history)
        oom = {t.candidate.key() for t in history if t.status is TrialStatus.OOM}
        for stage in self.grid:
            for cand in stage:
                if cand.key() in oom:
                    break  # this stage's largest micro-batch that fits is found
                if cand.key() not in measured:
                    return Proposal(cand, "ZeRO stage x micro-batch sweep")
        self.stop_reason = "every ZeRO stage swept up to its largest micro-batch that fits"
        return None


@dataclass(slots=True)
class SweepStrategy(Strategy):
    """The run stage's ``Strategy`` with the sweep as its sampler (ranked by measurement)."""

    def prepare(self, space: SearchSpace, patches: list[str] | None = None) -> PreparedStrategy:
        return PreparedStrategy.on(self, space, ZeroMicroSweep(space))

    @classmethod
    def like(cls, strategy: Strategy) -> SweepStrategy:
        return cls(**{f.name: getattr(strategy, f.name) for f in fields(strategy)})
