"""A search strategy for the run stage: who proposes the next candidate, what it knows beforehand
(priors, experience-bank seeds), and what it leaves behind (findings for the bank).

``infrarsi`` is InfraRSI's own sampler; ``random``, ``greedy`` and ``batchfinder`` are the peers
behind the same ``ask(history)``; ``tpe`` and ``gp`` are Optuna's own samplers driving the study,
with OOM handled the way their users do (a failed trial for TPE, a constraint for GP).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import optuna

from infrarsi import patches as patch_library
from infrarsi.contract import Contract
from infrarsi.llm import LLMConfig, load_llm_config
from infrarsi.priors import PriorContext, PriorTable, default_provider
from infrarsi.priors.types import neutral_prior
from infrarsi.records import DoctorReport
from infrarsi.search.baselines import BatchFinderSampler, GreedySampler, RandomSampler
from infrarsi.search.calibration import prior_checks
from infrarsi.search.gp import DEFAULT_NOISE_FLOOR
from infrarsi.search.history import distinct, measured_fast, measured_keys, measured_slow
from infrarsi.search.memory_model import MemoryModel
from infrarsi.search.sampler import Sampler, rank_by_measurement
from infrarsi.search.samplers import InfraRSISampler
from infrarsi.search.space import SearchSpace
from infrarsi.settings import Setting
from infrarsi.trials import Candidate, TrialResult, TrialStatus
from infrarsi.verification import ahead_of_baseline

SAMPLERS = ("infrarsi", "tpe", "gp", "random", "greedy", "batchfinder")
BANK_SEEDS = 3
MAX_NOISE_FLOOR = 0.5
"""A baseline measured on a busy machine can show a CV near 1; the time model's noise stays a log-sd below this."""


def _infrarsi(strategy: Strategy, space: SearchSpace) -> Sampler:
    seeds = [s for s in strategy.seeds if space.is_valid(s)]
    return InfraRSISampler(space, strategy.priors, seeds, seed=strategy.seed,
                           noise_floor=min(max(strategy.noise_cv, DEFAULT_NOISE_FLOOR), MAX_NOISE_FLOOR),
                           noise_cv=strategy.noise_cv or None, min_speedup=strategy.min_speedup)


OWN_SAMPLERS: dict[str, Callable[[Strategy, SearchSpace], Sampler]] = {
    "infrarsi": _infrarsi,
    "random": lambda strategy, space: RandomSampler(space, seed=strategy.seed),
    "greedy": lambda strategy, space: GreedySampler(space, strategy.priors, seed=strategy.seed),
    "batchfinder": lambda strategy, space: BatchFinderSampler(space, seed=strategy.seed),
}
"""The strategies whose candidates InfraRSI chooses (and enqueues in the study)."""
OPTUNA_SAMPLERS: dict[str, Callable[..., optuna.samplers.BaseSampler]] = {
    "tpe": optuna.samplers.TPESampler,
    "gp": optuna.samplers.GPSampler,
}
"""The strategies where Optuna's own sampler drives the study."""
OOM_AS_CONSTRAINT = ("gp",)
"""Samplers that learn OOM as a constraint (GP, as its users do) rather than a failed trial (TPE)."""


@dataclass(slots=True)
class Strategy:
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
    bank: Any = None
    bank_priors: PriorTable = field(default_factory=PriorTable)
    """What the bank said, per key, before it was combined with the other priors (for the report)."""
    signature: Any = None
    hardware: Any = None
    space: SearchSpace | None = None
    sampler: Sampler | None = None
    """Ours (``OWN_SAMPLERS``) after ``prepare``; None where an Optuna sampler drives the study."""

    @property
    def optuna_sampler(self) -> optuna.samplers.BaseSampler:
        # Our own samplers choose the candidate and enqueue it; Optuna's sampler never decides.
        return OPTUNA_SAMPLERS.get(self.name, optuna.samplers.RandomSampler)(seed=self.seed)

    @property
    def oom_as_constraint(self) -> bool:
        return self.name in OOM_AS_CONSTRAINT

    def baseline(self) -> Candidate:
        return Candidate(knobs={k.name: k.default for k in self.contract.tunable})

    def prepare(self, space: SearchSpace) -> None:
        self.space = space
        make = OWN_SAMPLERS.get(self.name)
        self.sampler = make(self, space) if make is not None else None

    def propose(self, history: list[TrialResult]) -> tuple[Candidate | None, str] | None:
        """The next candidate and why; (None, reason) lets Optuna's sampler choose; None: space exhausted."""
        if self.sampler is None:
            if len(measured_keys(history)) >= self.space.size():
                return None
            return None, f"optuna {self.name}"
        proposal = self.sampler.ask(history)
        return None if proposal is None else (proposal.candidate, proposal.reason)

    @property
    def stop_reason(self) -> str:
        """Why the last ``propose`` returned None."""
        return (self.sampler.stop_reason if self.sampler is not None else "") or "every candidate measured"

    def to_verify(self, history: list[TrialResult], k: int) -> list[Candidate]:
        """What re-verification reruns: the ``k`` best ranked ahead of the baseline, plus every
        candidate measured faster than the baseline beyond doctor's noise floor that the ranking
        leaves out (its model disagrees with a measurement) and the fastest measured one: what the
        trials showed is checked, whatever the model believes; and none measured slower than the
        baseline beyond that floor, however the model ranks it."""
        baseline = self.baseline()
        planned = self.contract.workload.planned_steps
        slow = measured_slow(history, baseline, planned, self.min_speedup)
        ranked = [c for c in self.top_candidates(history, max(k + 1, len(measured_keys(history)))) if c.key() not in slow]
        chosen = ahead_of_baseline(ranked, baseline, k)
        keys = [c.key() for c in ranked]
        ahead = set(keys[:keys.index(baseline.key())] if baseline.key() in keys else keys)
        fast = measured_fast(history, baseline, planned, self.min_speedup)
        extra = [c for i, c in enumerate(fast) if i == 0 or c.key() not in ahead]
        return distinct(chosen + extra)

    def top_candidates(self, history: list[TrialResult], k: int) -> list[Candidate]:
        """What to re-verify: the sampler's ranking (InfraRSI's by its model); Optuna's samplers'
        by their best measured runs."""
        planned = self.contract.workload.planned_steps
        if self.sampler is None:
            return rank_by_measurement(history, k, planned)
        return self.sampler.ranked(history, k, planned)

    def prior_checks(self, history: list[TrialResult]) -> list[dict[str, Any]]:
        if self.space is None:
            return []
        return [check.to_dict() for check in prior_checks(self.space, self.priors, history,
                                                          noise_cv=self.noise_cv or None)]

    def bank_outcomes(self, history: list[TrialResult]) -> list[dict[str, Any]]:
        """Each prior the bank contributed, what it said alone, and what this run made of it: flagged
        (its trials contradict it, so it stopped steering the search), consistent, or not tried."""
        if self.space is None or not len(self.bank_priors):
            return []
        checks = {c.key: c for c in prior_checks(self.space, self.priors, history, noise_cv=self.noise_cv or None)
                  if c.quantity == "time"}
        out = []
        for key in sorted(self.bank_priors):
            bank, used, check = self.bank_priors.get(key), self.priors.get(key), checks.get(key)
            tried = check is not None and check.n_trials > 0
            outcome = ("not in this run's search space" if key not in self.space.setting_keys else
                       "not tried in this run" if not tried else
                       "flagged: this run's trials contradict it; it stopped steering the search"
                       if check.miscalibrated else "consistent with this run's trials")
            out.append({"key": key, "bank_mean": bank.time_log_mean, "bank_sd": bank.time_log_sd,
                        "source": bank.source, "used_mean": used.time_log_mean, "used_sd": used.time_log_sd,
                        "observed": check.observed if tried else None,
                        "observed_sd": check.observed_sd if tried else None,
                        "n_trials": check.n_trials if check else 0,
                        "miscalibrated": bool(tried and check.miscalibrated), "outcome": outcome})
        return out

    def memory_prices(self, history: list[TrialResult]) -> list[dict[str, Any]]:
        if self.space is None:
            return []
        model = MemoryModel(self.space, self.priors).fit(history)
        return [price.to_dict() for price in model.prices()] if model.fitted else []

    def record_findings(self, result, history: list[TrialResult]) -> None:
        """Effects, patch verdicts and the promoted configuration, for the next run here or elsewhere."""
        if self.bank is None or self.space is None:
            return
        from infrarsi.bank import BestConfig, EffectFinding, PatchFinding

        effects = []
        # Every setting gets a check, a neutral prior where the table had none: a finding is what
        # the trials showed, whatever was believed before.
        everything = PriorTable.of([neutral_prior(k) for k in self.space.setting_keys]).merged(self.priors)
        for check in prior_checks(self.space, everything, history, noise_cv=self.noise_cv or None):
            # A setting no trial held has only the ridge's shrunk zero to show: not a finding.
            if check.quantity != "time" or not math.isfinite(check.observed) or check.n_trials == 0:
                continue
            setting = Setting.parse(check.key)
            role = "patch" if setting.patch else self.contract.knob(setting.name).role
            baseline = "off" if setting.patch else self.contract.knob(setting.name).default
            effects.append(EffectFinding(key=check.key, role=role, value=setting.value or "on", baseline=baseline,
                                         time_log=check.observed, time_sd=max(check.observed_sd, 1e-3),
                                         n=check.n_trials, noise_cv=self.noise_cv or None))
        verdicts = [PatchFinding(patch=c.name, verdict="ok" if c.status == "validated" else
                                 ("not_applicable" if c.status == "skipped" else c.status), detail=c.reason[:200])
                    for c in result.patch_checks if c.status != TrialStatus.DISTURBED.value]  # says nothing of the patch
        best = []
        if result.promoted and result.promoted.job_speedup:
            point, low, high = result.promoted.job_speedup
            best.append(BestConfig(candidate=result.promoted.candidate, speedup=point, interval=(low, high)))
        self.bank.record_run(signature=self.signature, hardware_id=self.hardware.id,
                             hardware=self.hardware.describe(), effects=effects, verdicts=verdicts, best=best)


def _editable_sources(repo: Path, contract: Contract) -> dict[str, str]:
    out = {}
    for rel in contract.scope.editable:
        path = Path(repo) / rel
        if path.is_file():
            out[rel] = path.read_text(errors="replace")
    return out


def make_strategy(name: str, *, repo: Path, contract: Contract, doctor: DoctorReport, seed: int = 0,
                  llm: LLMConfig | None = None,
                  bank_url: str | None = None, use_bank: bool = True) -> Strategy:
    """Priors from the configured provider (LLM or built-in), revised by the bank's findings; bank seeds."""
    hardware = doctor.hardware
    context = PriorContext(contract=contract, hardware=hardware, doctor=doctor.to_dict(),
                           sources=_editable_sources(repo, contract), patches=patch_library.declared_priors(hardware.device))
    answer = default_provider(llm if llm is not None else load_llm_config(repo)).priors(context)
    priors, source = answer.table, answer.provider + ("" if answer.ok else f" (fallback: {answer.reason})")
    strategy = Strategy(name=name, contract=contract, priors=priors, priors_source=source, seed=seed,
                        hardware=hardware, noise_cv=doctor.noise.effective_cv, min_speedup=doctor.noise.min_speedup)
    if use_bank:
        from infrarsi.bank import ExperienceBank, WorkloadSignature

        use_experience(strategy, ExperienceBank(bank_url), WorkloadSignature.from_contract(contract, doctor.model_facts))
    return strategy


def use_experience(strategy: Strategy, bank, signature) -> None:
    """Read the bank into ``strategy``: its findings combined with the priors (a finding moves a
    belief as far as its trials deserve, ``PriorTable.combined``), and its seeds (which only
    InfraRSI's own sampler runs first; the peers are compared without them)."""
    strategy.bank, strategy.signature = bank, signature
    hardware_id = strategy.hardware.id
    strategy.bank_priors = bank.priors_for(signature, hardware_id, baselines=strategy.contract.defaults())
    if len(strategy.bank_priors):
        strategy.priors = strategy.priors.combined(strategy.bank_priors)
        strategy.priors_source += f" + experience bank ({len(strategy.bank_priors)} effects)"
    strategy.seeds = [s.candidate for s in bank.seeds(signature, hardware_id, k=BANK_SEEDS)]
