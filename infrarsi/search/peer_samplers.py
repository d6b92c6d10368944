"""Peer samplers InfraRSI is compared with, behind the same ``ask(history)`` interface.

- RandomSampler: a fresh valid candidate at random.
- GreedySampler: one incumbent, change one knob or patch at a time, keep the change if it is
  faster (how a coding agent steps through a config).
- BatchFinderSampler: the largest micro-batch that fits (doubling, then bisection on OOM), then a
  grid over the other knobs at that batch (DeepSpeed Autotuning / Lightning batch finder style).
- PriorsOnlySampler: the priors alone, no model learnt from the trials: the best the priors predict
  of what they predict fits, then its neighbours, then the rest in the priors' order, an OOM
  putting everything the memory priors rank at or above it last. It separates what the priors give
  from what InfraRSI's search adds.
None of them repeats a measured candidate; each returns None once the space is exhausted.
"""

from __future__ import annotations

import numpy as np

from infrarsi.contract import Knob, KnobValue
from infrarsi.priors.types import PriorTable
from infrarsi.search.effects import setting_priors
from infrarsi.search.history import best_ok, measured_keys
from infrarsi.search.sampler import Proposal, Sampler
from infrarsi.search.space import SearchSpace
from infrarsi.trials import Candidate, TrialResult, TrialStatus

_DOES_NOT_FIT = (TrialStatus.OOM, TrialStatus.CRASH)


def _random_fresh(space: SearchSpace, rng: np.random.Generator, measured: set[str],
                  enumerate_limit: int = 20_000) -> Candidate | None:
    if space.size() <= enumerate_limit:
        pool = space.enumerated()
        fresh = [c for c, k in zip(pool.candidates, pool.keys, strict=True) if k not in measured]
        return fresh[int(rng.integers(len(fresh)))] if fresh else None
    for cand in space.sample(rng, 256):
        if cand.key() not in measured:
            return cand
    return None


class RandomSampler(Sampler):
    def __init__(self, space: SearchSpace, *, seed: int = 0):
        self.space = space
        self.rng = np.random.default_rng(seed)

    def ask(self, history: list[TrialResult]) -> Proposal | None:
        cand = _random_fresh(self.space, self.rng, measured_keys(history))
        return Proposal(cand, "random") if cand else None


class GreedySampler(Sampler):
    def __init__(self, space: SearchSpace, priors: PriorTable | None = None, *, seed: int = 0):
        self.space = space
        self.rng = np.random.default_rng(seed)
        self.prior_time = dict(zip(space.setting_keys, setting_priors(space, priors or PriorTable(), "time").mean,
                                   strict=True))

    def _prior_gain(self, cand: Candidate, incumbent: Candidate) -> float:
        """Prior log-time change of moving from the incumbent to ``cand`` (lower: more promising)."""
        def total(c: Candidate) -> float:
            return sum(self.prior_time.get(k, 0.0) for k in self.space.settings(c))

        return total(cand) - total(incumbent)

    def ask(self, history: list[TrialResult]) -> Proposal | None:
        measured = measured_keys(history)
        incumbent = best_ok(history, self.space.planned_steps)
        if incumbent is None:
            base = self.space.baseline()
            if base.key() not in measured:
                return Proposal(base, "baseline")
            cand = _random_fresh(self.space, self.rng, measured)
            return Proposal(cand, "no incumbent yet: random") if cand else None
        moves = [c for c in self.space.neighbours(incumbent.candidate) if c.key() not in measured]
        if moves:
            self.rng.shuffle(moves)
            best = min(moves, key=lambda c: self._prior_gain(c, incumbent.candidate))
            return Proposal(best, "one change from the incumbent")
        cand = _random_fresh(self.space, self.rng, measured)
        return Proposal(cand, "local optimum: random restart") if cand else None


class BatchFinderSampler(Sampler):
    def __init__(self, space: SearchSpace, *, seed: int = 0):
        self.space = space
        self.rng = np.random.default_rng(seed)
        found = space.coupled.get("micro_batch") or next((k for k in space.knobs if k.role == "micro_batch"), None)
        self.knob = found if found is not None and found.tunable else None

    def _ladder(self, knob: Knob) -> list[tuple[int, Candidate]]:
        """Baseline with each micro-batch value, ascending (only values with a valid candidate)."""
        base = self.space.baseline()
        out = []
        for value in sorted(v for v in knob.domain if isinstance(v, int)):  # a micro-batch knob's type is int
            cand = self.space.with_value(base, knob.name, value)
            if cand is not None:
                out.append((value, cand))
        return out

    def _next_batch(self, knob: Knob, history: list[TrialResult]) -> Candidate | int:
        """The next ladder candidate to try, or (search over) the largest micro-batch that fits."""
        ladder = self._ladder(knob)
        status: dict[str, set[TrialStatus]] = {}
        for t in history:
            status.setdefault(t.candidate.key(), set()).add(t.status)
        fits = [i for i, (_, c) in enumerate(ladder) if status.get(c.key(), set()) - set(_DOES_NOT_FIT)]
        fails = [i for i, (_, c) in enumerate(ladder) if status.get(c.key(), set()) & set(_DOES_NOT_FIT)]
        values = [v for v, _ in ladder]
        lo = max(fits, default=None)
        hi = min((i for i in fails if lo is None or i > lo), default=None)
        if lo is None:
            if hi is None:
                start = self.space.baseline().knobs[knob.name]
                return ladder[next((i for i, v in enumerate(values) if v == start), 0)][1]
            # Even the start does not fit: halve.
            if hi == 0:
                return values[0]
            nxt = max(i for i, v in enumerate(values) if v <= values[hi] / 2 or i == 0)
            return ladder[nxt][1] if nxt < hi else values[0]
        if hi is None:
            if lo == len(values) - 1:
                return values[lo]
            # Double (the smallest value at least twice the largest that fits).
            nxt = next((i for i, v in enumerate(values) if v >= 2 * values[lo]), len(values) - 1)
            return ladder[nxt][1]
        if hi - lo > 1:
            return ladder[(lo + hi) // 2][1]  # bisect between what fits and what does not
        return values[lo]

    def ask(self, history: list[TrialResult]) -> Proposal | None:
        measured = measured_keys(history)
        fixed: dict[str, KnobValue] = {}
        if self.knob is not None:
            step = self._next_batch(self.knob, history)
            if isinstance(step, Candidate):
                if step.key() not in measured:
                    return Proposal(step, "micro-batch finder")
            else:
                fixed = {self.knob.name: step}
        for cand in self.space.knob_grid(fixed):
            if cand.key() not in measured:
                return Proposal(cand, f"grid at {fixed or 'defaults'}")
        fresh = _random_fresh(self.space, self.rng, measured)
        return Proposal(fresh, "grid done: random") if fresh else None


ENUMERATE_LIMIT = 20_000
"""A space larger than this is ranked over a random sample of this many candidates (with the
baseline's neighbours)."""


class PriorsOnlySampler(Sampler):
    def __init__(self, space: SearchSpace, priors: PriorTable | None = None, *, seed: int = 0):
        self.space = space
        self.rng = np.random.default_rng(seed)
        table = priors or PriorTable()
        self.time = dict(zip(space.setting_keys, setting_priors(space, table, "time").mean, strict=True))
        self.mem = dict(zip(space.setting_keys, setting_priors(space, table, "mem").mean, strict=True))
        self._order: list[Candidate] | None = None

    def _log(self, effects: dict[str, float], cand: Candidate) -> float:
        return sum(effects.get(k, 0.0) for k in self.space.settings(cand))

    def _ranked(self, base_peak: int | None) -> list[Candidate]:
        """Every candidate (or a sample of a large space), fastest predicted first, those predicted
        not to fit (the baseline's measured peak moved by the memory priors) after all that fit."""
        if self.space.size() <= ENUMERATE_LIMIT:
            pool = list(self.space.enumerated().candidates)
        else:
            pool = [*self.space.sample(self.rng, ENUMERATE_LIMIT), *self.space.neighbours(self.space.baseline())]
        budget = self.space.budget_bytes

        def fits(c: Candidate) -> bool:
            return not base_peak or base_peak * np.exp(self._log(self.mem, c)) <= budget

        ranked = sorted({c.key(): c for c in pool}.values(), key=lambda c: (not fits(c), self._log(self.time, c)))
        if not ranked:
            return []
        best = ranked[0]
        near = sorted(self.space.neighbours(best), key=lambda c: (not fits(c), self._log(self.time, c)))
        return list({c.key(): c for c in [best, *near, *ranked]}.values())

    def ask(self, history: list[TrialResult]) -> Proposal | None:
        measured = measured_keys(history)
        base = self.space.baseline()
        if base.key() not in measured:
            return Proposal(base, "baseline")
        if self._order is None:
            peaks = [t.peak_bytes for t in history if t.candidate.key() == base.key() and t.ok and t.peak_bytes]
            self._order = self._ranked(peaks[0] if peaks else None)
        # An OOM is a wall: nothing the memory priors put at or above it comes before what they put below.
        walls = [self._log(self.mem, t.candidate) for t in history if t.status is TrialStatus.OOM]
        wall = min(walls, default=np.inf)
        fresh = [c for c in self._order if c.key() not in measured]
        below = [c for c in fresh if self._log(self.mem, c) < wall]
        return Proposal((below or fresh)[0], "the priors' next best") if fresh else None
