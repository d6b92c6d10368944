"""A search strategy for the run stage: who proposes the next candidate, what it knows beforehand
(priors, the experience bank's priors and seeds, given as values: ``infrarsi.bank.experience``
reads and writes the bank), and what re-verification reruns.

``infrarsi`` is InfraRSI's own sampler; ``random``, ``greedy`` and ``batchfinder`` are the peers
behind the same ``ask(history)``; so are ``tpe`` and ``gp``, Optuna's own samplers over a study of
their own, with OOM handled the way their users do (a failed trial for TPE, a constraint for GP).

The space is known only once the patches are validated: a ``Strategy`` is what the run knows
before, and ``prepare`` gives the ``PreparedStrategy`` whose sampler proposes on that space.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field, fields

from infrarsi import patches as patch_library
from infrarsi.contract import Contract
from infrarsi.priors import PriorContext, PriorTable, default_provider
from infrarsi.project import Project
from infrarsi.records import BankPriorRow, HardwareFingerprint, MemoryPriceRow, PriorCheckRow
from infrarsi.search.calibration import prior_checks
from infrarsi.search.gp import DEFAULT_NOISE_FLOOR
from infrarsi.search.history import distinct, measured_fast, measured_keys, measured_slow, unmatched_fastest
from infrarsi.search.infrarsi_sampler import InfraRSISampler
from infrarsi.search.memory_model import MemoryModel
from infrarsi.search.optuna_samplers import OPTUNA_SAMPLERS, OptunaSampler
from infrarsi.search.part_interactions import PartInteractions, part_interactions
from infrarsi.search.peer_samplers import BatchFinderSampler, GreedySampler, PriorsOnlySampler, RandomSampler
from infrarsi.search.prior_check import PriorCheck
from infrarsi.search.sampler import Proposal, Sampler, rank_by_measurement
from infrarsi.search.space import SearchSpace
from infrarsi.trials import Candidate, TrialResult
from infrarsi.whole_process import ahead_of_baseline

BANK_SEEDS = 3
"""The bank's seeds run first, at most these many of those valid in this space (the bank offers
more: a bank written on another cluster holds layouts this one cannot run)."""
SAMPLERS = ("infrarsi", "tpe", "gp", "random", "greedy", "batchfinder", "priors")
MAX_NOISE_FLOOR = 0.5
"""A baseline measured on a busy machine can show a CV near 1; the time model's noise stays a log-sd below this."""


def _infrarsi(strategy: Strategy, space: SearchSpace, patches: list[str],
              interactions: PartInteractions | None) -> Sampler:
    seeds = [s for s in strategy.seeds if space.is_valid(s)][:BANK_SEEDS]
    return InfraRSISampler(space, strategy.priors, seeds, unbanked=strategy.unbanked_priors, seed=strategy.seed,
                           noise_floor=min(max(strategy.noise_cv, DEFAULT_NOISE_FLOOR), MAX_NOISE_FLOOR),
                           noise_cv=strategy.noise_cv or None, min_speedup=strategy.min_speedup,
                           interactions=interactions)


def _optuna(strategy: Strategy, space: SearchSpace, patches: list[str],
            interactions: PartInteractions | None) -> Sampler:
    return OptunaSampler(strategy.name, space, strategy.contract, patches, seed=strategy.seed,
                         max_rejected=strategy.max_rejected)


MakeSampler = Callable[["Strategy", SearchSpace, list[str], PartInteractions | None], Sampler]
"""A strategy's sampler on a space, from the patches the run's study holds and the layout's known
memory interactions there (``part_interactions``)."""

MAKE_SAMPLER: dict[str, MakeSampler] = {
    "infrarsi": _infrarsi,
    "random": lambda strategy, space, patches, interactions: RandomSampler(space, seed=strategy.seed),
    "greedy": lambda strategy, space, patches, interactions: GreedySampler(space, strategy.priors, seed=strategy.seed),
    "batchfinder": lambda strategy, space, patches, interactions: BatchFinderSampler(space, seed=strategy.seed),
    "priors": lambda strategy, space, patches, interactions: PriorsOnlySampler(space, strategy.priors,
                                                                               seed=strategy.seed),
    **{name: _optuna for name in OPTUNA_SAMPLERS},
}
"""Each strategy's sampler (only Optuna's samplers choose among patches that failed validation, as
they always have)."""


@dataclass(slots=True)
class Strategy:
    """What a run's search knows before its space: the priors, the bank's advice, doctor's noise;
    what re-verification reruns, by measurement alone until ``prepare`` gives it a sampler."""

    name: str
    contract: Contract
    priors: PriorTable
    priors_source: str
    seeds: list[Candidate] = field(default_factory=list)
    seed: int = 0
    noise_cv: float = 0.0
    """Doctor's run-to-run CV of the step time: the time model never assumes less noise."""
    min_speedup: float = math.inf
    """Doctor's noise floor: a candidate measured faster than the baseline by more is always
    re-verified, and the search does not call itself converged while the model disputes one
    (infinite when no doctor report is given: only the ranking decides)."""
    bank_priors: PriorTable = field(default_factory=PriorTable)
    """What the bank said, per key, before it was combined with the other priors (for the report)."""
    unbanked_priors: PriorTable | None = None
    """The priors before the bank's were combined in (None: no bank), for a search that finds the bank wrong."""
    max_rejected: int = 0
    """Optuna's proposals outside the valid space given back before one is run anyway
    (``OptunaSampler``): the run stage runs each one; the benchmark's replay rejects them as
    Optuna's users do."""
    hardware: HardwareFingerprint | None = None
    """The machine (None: the layout's memory interactions are not known)."""

    def baseline(self) -> Candidate:
        return Candidate(knobs={k.name: k.default for k in self.contract.tunable})

    @property
    def own_priors(self) -> PriorTable:
        """The priors from this run's own sources, the bank's findings left out."""
        return self.priors if self.unbanked_priors is None else self.unbanked_priors

    def use_bank(self, priors: PriorTable, seeds: list[Candidate]) -> None:
        """The bank's findings combined with the priors (a finding moves a belief as far as its
        trials deserve, ``PriorTable.combined``), and its seeds (which only InfraRSI's own sampler
        runs first; the peers are compared without them)."""
        self.bank_priors = priors
        self.unbanked_priors = self.priors
        if len(priors):
            self.priors = self.priors.combined(priors)
            self.priors_source += f" + experience bank ({len(priors)} effects)"
        self.seeds = list(seeds)

    def prepare(self, space: SearchSpace, patches: list[str] | None = None) -> PreparedStrategy:
        """This strategy on ``space`` with its sampler (``MAKE_SAMPLER``); ``patches``: those the run's
        study holds (default: the space's, the validated ones)."""
        interactions = None if self.hardware is None else part_interactions(space, self.hardware, self.contract)
        sampler = MAKE_SAMPLER[self.name](self, space, space.patches if patches is None else patches, interactions)
        return PreparedStrategy.on(self, space, sampler, interactions)

    def to_verify(self, history: list[TrialResult], k: int) -> list[Candidate]:
        """What re-verification reruns: the ``k`` best ranked ahead of the baseline, plus every
        candidate measured faster than the baseline beyond doctor's noise floor that the ranking
        leaves out (its model disagrees with a measurement) and the fastest measured one unless a
        chosen one measured within that floor of it (``unmatched_fastest``): what the trials showed
        is checked, whatever the model believes; and none measured slower than the baseline beyond
        that floor, however the model ranks it."""
        baseline = self.baseline()
        planned = self.contract.workload.planned_steps
        slow = measured_slow(history, baseline, planned, self.min_speedup)
        ranked = [c for c in self.top_candidates(history, max(k + 1, len(measured_keys(history)))) if c.key() not in slow]
        chosen = ahead_of_baseline(ranked, baseline, k)
        keys = [c.key() for c in ranked]
        ahead = set(keys[:keys.index(baseline.key())] if baseline.key() in keys else keys)
        fast = measured_fast(history, baseline, planned, self.min_speedup)
        extra = [c for c in fast if c.key() not in ahead]
        return distinct(chosen + extra + unmatched_fastest(history, chosen, baseline, planned, self.min_speedup))

    def top_candidates(self, history: list[TrialResult], k: int) -> list[Candidate]:
        """What to re-verify before the space is known: the best measured runs."""
        return rank_by_measurement(history, k, self.contract.workload.planned_steps)

    def prior_checks(self, history: list[TrialResult]) -> list[PriorCheckRow]:
        """Each prior against the trials (``PreparedStrategy``): none before the space is known."""
        return []

    def bank_outcomes(self, history: list[TrialResult]) -> list[BankPriorRow]:
        """What the run made of the bank's priors (``PreparedStrategy``): nothing before the space is known."""
        return []

    def memory_prices(self, history: list[TrialResult]) -> list[MemoryPriceRow]:
        """What each setting costs in memory (``PreparedStrategy``): none before the space is known."""
        return []


@dataclass(slots=True, kw_only=True)
class PreparedStrategy(Strategy):
    """A strategy on its search space (``Strategy.prepare``): its sampler proposes and ranks, and its
    priors are checked against the trials there."""

    space: SearchSpace
    sampler: Sampler
    """The strategy's sampler (``MAKE_SAMPLER``)."""
    interactions: PartInteractions | None = None
    """The layout's known effects on the memory's parts in ``space`` (``part_interactions``; None:
    the machine is not known)."""

    @classmethod
    def on(cls, strategy: Strategy, space: SearchSpace, sampler: Sampler,
           interactions: PartInteractions | None = None) -> PreparedStrategy:
        """``strategy`` on ``space`` with ``sampler``: ``prepare`` picks it by the strategy's name (a
        benchmark's own strategy brings its own)."""
        known = {f.name: getattr(strategy, f.name) for f in fields(Strategy)}
        return cls(**known, space=space, sampler=sampler, interactions=interactions)

    def propose(self, history: list[TrialResult]) -> Proposal | None:
        """The next candidate, why, and what the sampler expects of it; None: nothing left worth a trial."""
        return self.sampler.ask(history)

    @property
    def repeats(self) -> bool:
        """Whether the sampler may propose a measured candidate again, and means it (Optuna's)."""
        return self.sampler.repeats

    @property
    def stop_reason(self) -> str:
        """Why the last ``propose`` returned None."""
        return self.sampler.stop_reason or "every candidate measured"

    def top_candidates(self, history: list[TrialResult], k: int) -> list[Candidate]:
        """What to re-verify: the sampler's ranking (InfraRSI's by its model; the others' by their
        best measured runs)."""
        return self.sampler.ranked(history, k, self.contract.workload.planned_steps)

    def _checks(self, history: list[TrialResult]) -> list[PriorCheck]:
        return prior_checks(self.space, self.priors, history, noise_cv=self.noise_cv or None,
                            interactions=self.interactions)

    def prior_checks(self, history: list[TrialResult]) -> list[PriorCheckRow]:
        return [check.row() for check in self._checks(history)]

    def bank_outcomes(self, history: list[TrialResult]) -> list[BankPriorRow]:
        """Each prior the bank contributed, what it said alone, and what this run made of it: flagged
        (its trials contradict it, so it stopped steering the search), consistent, or not tried."""
        if not len(self.bank_priors):
            return []
        checks = {c.key: c for c in self._checks(history) if c.quantity == "time"}
        out = []
        for key in sorted(self.bank_priors):
            bank, used, check = self.bank_priors.get(key), self.priors.get(key), checks.get(key)
            tried = check if check is not None and check.n_trials > 0 else None
            outcome = ("not in this run's search space" if key not in self.space.setting_keys else
                       "not tried in this run" if tried is None else
                       "flagged: this run's trials contradict it; it stopped steering the search"
                       if tried.miscalibrated else "consistent with this run's trials")
            out.append(BankPriorRow(key=key, bank_mean=bank.time_log_mean, bank_sd=bank.time_log_sd,
                                    source=bank.source, used_mean=used.time_log_mean, used_sd=used.time_log_sd,
                                    observed=tried.observed if tried is not None else None,
                                    observed_sd=tried.observed_sd if tried is not None else None,
                                    n_trials=check.n_trials if check else 0,
                                    miscalibrated=bool(tried is not None and tried.miscalibrated), outcome=outcome))
        return out

    def memory_prices(self, history: list[TrialResult]) -> list[MemoryPriceRow]:
        model = MemoryModel(self.space, self.priors, interactions=self.interactions).fit(history)
        return [price.row() for price in model.prices()] if model.fitted else []


def make_strategy(name: str, project: Project, *, seed: int = 0) -> Strategy:
    """Priors from the configured provider (LLM or built-in); the bank's come after (``use_bank``)."""
    contract, doctor = project.contract, project.doctor
    hardware = doctor.hardware
    context = PriorContext(contract=contract, hardware=hardware, doctor=doctor,
                           sources=dict(project.sources), patches=patch_library.declared_priors(hardware.device))
    answer = default_provider(project.llm).priors(context)
    priors, source = answer.table, answer.provider + ("" if answer.ok else f" (fallback: {answer.reason})")
    return Strategy(name=name, contract=contract, priors=priors, priors_source=source, seed=seed, hardware=hardware,
                    noise_cv=doctor.noise.effective_cv, min_speedup=doctor.noise.min_speedup)
