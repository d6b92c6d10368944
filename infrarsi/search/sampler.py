"""What every search strategy's sampler is: ``ask(history)`` for the next candidate, ``stop_reason``
when it has none, and ``ranked`` for what re-verification reruns.

InfraRSI's sampler (``infrarsi_sampler.InfraRSISampler``), the peers (``peer_samplers``) and
Optuna's (``optuna_samplers``) implement it; ``tests/search/test_sampler_conformance.py`` runs every
strategy of the run stage through it.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field

from infrarsi.search.history import best_ok, failed_keys
from infrarsi.trials import Candidate, TrialResult


@dataclass(frozen=True, slots=True)
class Proposal:
    candidate: Candidate
    reason: str
    predicted: dict[str, float] = field(default_factory=dict)
    """What the models expect: step_s, step_log_sd, startup_s, job_s, p_fits, peak_bytes, ei…"""


def rank_by_measurement(history: list[TrialResult], k: int, planned_steps: int) -> list[Candidate]:
    """The ``k`` best candidates by their best measured job time, any that ever failed left out."""
    failed = failed_keys(history)
    ranked: list[Candidate] = []
    pool = [t for t in history if t.ok and t.candidate.key() not in failed]
    while pool and len(ranked) < k:
        best = best_ok(pool, planned_steps)
        if best is None:  # what is left measured no step time
            break
        ranked.append(best.candidate)
        pool = [t for t in pool if t.candidate.key() != best.candidate.key()]
    return ranked


class Sampler(ABC):
    stop_reason: str = ""
    """Why the last ``ask`` proposed nothing (empty: the space is exhausted, or not asked yet)."""
    repeats: bool = False
    """Whether a proposal may be a candidate already measured (Optuna's, as its users run them): the
    run stage then measures it again instead of giving way to the earlier trial as a duplicate."""

    @abstractmethod
    def ask(self, history: list[TrialResult]) -> Proposal | None:
        """The next candidate to run and why; None when there is nothing left worth a trial."""

    def ranked(self, history: list[TrialResult], k: int, planned_steps: int) -> list[Candidate]:
        """The ``k`` candidates re-verification should rerun first: by measurement, unless a
        sampler's model knows better."""
        return rank_by_measurement(history, k, planned_steps)
