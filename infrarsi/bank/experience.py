"""The experience bank as a run uses it: read before the search (the bank's priors and seeds, which
the search strategy gets as values) and written after it (what the run's trials showed).

Not exported from ``infrarsi.bank``: it reads trials through the search's prior checks, which the
bank's own commands (``infrarsi bank``) have no need to import.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from infrarsi.bank.signature import WorkloadSignature
from infrarsi.bank.store import BestConfig, EffectFinding, ExperienceBank, PatchFinding
from infrarsi.contract import Contract
from infrarsi.priors.types import PriorTable, neutral_prior
from infrarsi.search.calibration import prior_checks
from infrarsi.search.space import SearchSpace
from infrarsi.settings import Setting
from infrarsi.trials import Candidate, TrialResult, TrialStatus

if TYPE_CHECKING:
    from infrarsi.records import RunResult

BANK_SEEDS = 12
"""Seeds offered; the search keeps the first few valid in its own space (``strategy.BANK_SEEDS``)."""


@dataclass(frozen=True, slots=True)
class Advice:
    """What the bank holds for a workload on a machine."""

    priors: PriorTable = field(default_factory=PriorTable)
    """Per key, what the bank's findings say alone (before they are combined with other priors)."""
    seeds: list[Candidate] = field(default_factory=list)
    """The best configurations of similar runs, to try first."""


@dataclass(frozen=True, slots=True)
class Experience:
    """One workload on one machine, in the bank."""

    bank: ExperienceBank
    signature: WorkloadSignature
    hardware: Any
    """The machine's fingerprint (``id`` and ``describe()``)."""

    @classmethod
    def open(cls, url: str | None, contract: Contract, model_facts: dict[str, Any], hardware: Any) -> Experience:
        return cls(ExperienceBank(url), WorkloadSignature.from_contract(contract, model_facts), hardware)

    def advice(self, contract: Contract, own: PriorTable | None = None) -> Advice:
        """``own``: this run's priors from its own sources, which the bank's findings are re-based
        on (``ExperienceBank.priors_for``'s ``reference``)."""
        return Advice(self.bank.priors_for(self.signature, self.hardware.id, baselines=contract.defaults(),
                                           reference=own),
                      [s.candidate for s in self.bank.seeds(self.signature, self.hardware.id, k=BANK_SEEDS)])

    def record(self, result: RunResult, history: list[TrialResult], *, contract: Contract, space: SearchSpace,
               priors: PriorTable, own: PriorTable, noise_cv: float) -> None:
        """Effects, patch verdicts and the promoted configuration, for the next run here or elsewhere:
        ``result`` the run's (its patch checks and promoted verdict), ``priors`` those the search used,
        ``own`` the run's priors from its own sources (each finding records what they expected),
        ``noise_cv`` doctor's run-to-run CV (0: not measured)."""
        effects = []
        # Every setting gets a check, a neutral prior where the table had none: a finding is what
        # the trials showed, whatever was believed before.
        everything = PriorTable.of([neutral_prior(k) for k in space.setting_keys]).merged(priors)
        for check in prior_checks(space, everything, history, noise_cv=noise_cv or None):
            # A setting no trial held has only the ridge's shrunk zero to show: not a finding.
            if check.quantity != "time" or not math.isfinite(check.observed) or check.n_trials == 0:
                continue
            setting = Setting.parse(check.key)
            role = "patch" if setting.patch else contract.knob(setting.name).role
            baseline = "off" if setting.patch else contract.knob(setting.name).default
            effects.append(EffectFinding(key=check.key, role=role, value=setting.value or "on", baseline=baseline,
                                         time_log=check.observed, time_sd=max(check.observed_sd, 1e-3),
                                         n=check.n_trials, noise_cv=noise_cv or None,
                                         prior_log=own.get(check.key).time_log_mean if check.key in own else None))
        verdicts = [PatchFinding(patch=c.name, verdict="ok" if c.status == "validated" else
                                 ("not_applicable" if c.status == "skipped" else c.status), detail=c.reason[:200])
                    for c in result.patch_checks if c.status != TrialStatus.DISTURBED.value]  # says nothing of the patch
        best = []
        if result.promoted and result.promoted.job_speedup:
            point, low, high = result.promoted.job_speedup
            best.append(BestConfig(candidate=result.promoted.candidate, speedup=point, interval=(low, high)))
        self.bank.record_run(signature=self.signature, hardware_id=self.hardware.id,
                             hardware=self.hardware.describe(), effects=effects, verdicts=verdicts, best=best)
