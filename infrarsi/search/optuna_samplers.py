"""Optuna's samplers (TPE, GP) behind ``ask(history)``, as their users run them.

Each owns an in-memory Optuna study that mirrors the history it is given, trial for trial, as the
run's own study holds it: its own proposals asked and told there, every other trial (the baseline,
patch validations, reruns) added with its outcome. It asks over each knob's whole domain and every
patch the run's study knows, as Optuna's users would: its proposal may lie outside the valid space
or repeat a measured candidate.

Each is configured as a careful user would for a budget of about 20 trials (docs/benchmarks.md,
fair peers): TPE multivariate; both with ``STARTUP_TRIALS`` random trials, not Optuna's 10 (half
the budget, and counted over complete trials only); an OOM told as a complete trial with a
penalised objective (``OOM_PENALTY`` times the slowest job measured so far) and a violated memory
constraint (``Trial.set_constraint``), which both samplers read: a failed trial, which TPE ignores
and GP's constraint model never sees, would teach neither anything about memory.
"""

from __future__ import annotations

from collections.abc import Callable

import optuna
from optuna.distributions import BaseDistribution

from infrarsi.contract import Contract
from infrarsi.search.history import measured_keys
from infrarsi.search.sampler import Proposal, Sampler
from infrarsi.search.space import SearchSpace
from infrarsi.study_codec import distributions, from_params, memory_constraint, outcome, to_params
from infrarsi.trials import TrialResult, TrialStatus

STARTUP_TRIALS = 5
"""Random trials before the model takes over: a quarter of a 20-trial budget."""
OPTUNA_SAMPLERS: dict[str, Callable[..., optuna.samplers.BaseSampler]] = {
    "tpe": lambda seed: optuna.samplers.TPESampler(seed=seed, multivariate=True, n_startup_trials=STARTUP_TRIALS),
    "gp": lambda seed: optuna.samplers.GPSampler(seed=seed, n_startup_trials=STARTUP_TRIALS),
}
CONSTRAINT = "memory"
OOM_PENALTY = 2.0
"""An OOM's objective: this many times the slowest job measured before it (the baseline's at least)."""


class OptunaSampler(Sampler):
    repeats = True

    def __init__(self, name: str, space: SearchSpace, contract: Contract, patches: list[str], *, seed: int = 0,
                 max_rejected: int = 0):
        """``space``: the validated candidates; ``patches``: those the run's study holds (every
        applicable one, validated or not: Optuna chooses among them all); ``max_rejected``:
        proposals no candidate of the study can be (outside the valid points of its knobs and
        ``patches``) given back to Optuna (failed, no trial spent) before the next one is returned
        whatever it is, as its users reject them (0: every proposal is returned)."""
        self.name = name
        self.space = space
        self.runnable = (space if set(patches) == set(space.patches)
                         else SearchSpace.from_contract(contract, list(patches)))
        self.contract = contract
        self.patches = list(patches)
        self.max_rejected = max_rejected
        self.rejected = 0
        """Proposals the last ``ask`` gave back."""
        self.sampler = OPTUNA_SAMPLERS[name](seed)
        self.dists: dict[str, BaseDistribution] = dict(distributions(contract, self.patches))
        self._study = self._fresh()
        self._slowest_s = 0.0
        """The slowest job any trial told so far measured: what an OOM's penalty scales."""
        self._told: list[TrialResult] = []
        self._asked: optuna.Trial | None = None

    def _fresh(self) -> optuna.Study:
        return optuna.create_study(direction="minimize", sampler=self.sampler)

    def _sync(self, history: list[TrialResult]) -> None:
        """Bring the study up to ``history``: the candidate asked last told its result where the
        history holds it, every other trial added as it ended. A history that is not the last one
        plus new trials (another worker's trial finished in between, one still running left) is
        mirrored afresh; the sampler keeps its random state, as the run's study sampler did."""
        n = len(self._told)
        if history[:n] != self._told:
            self._study, self._told, self._asked, self._slowest_s, n = self._fresh(), [], None, 0.0, 0
        for result in history[n:]:
            if self._asked is not None and result.candidate.key() == from_params(self._asked.params).key():
                self._tell(self._asked, result)
                self._asked = None
            else:
                self._add(result)
            self._told.append(result)
        if self._asked is not None:  # asked, never run (another worker began it first): given up
            self._study.tell(self._asked, state=optuna.trial.TrialState.FAIL)
            self._asked = None

    def _outcome(self, result: TrialResult) -> tuple[optuna.trial.TrialState, float | None]:
        """Optuna's state and objective for ``result``: an OOM complete at the penalty."""
        state, value = outcome(result, self.contract)
        if value is not None:
            self._slowest_s = max(self._slowest_s, value)
        if result.status is TrialStatus.OOM and self._slowest_s > 0:
            return optuna.trial.TrialState.COMPLETE, OOM_PENALTY * self._slowest_s
        return state, value

    def _tell(self, trial: optuna.Trial, result: TrialResult) -> None:
        state, value = self._outcome(result)
        trial.set_constraint(CONSTRAINT, memory_constraint(result, self.contract))
        self._study.tell(trial, value, state=state)

    def _add(self, result: TrialResult) -> None:
        state, value = self._outcome(result)
        # GP refuses a study where some trials carry the constraint and others not: all do.
        self._study.add_trial(optuna.trial.create_trial(
            state=state, value=value, params=to_params(result.candidate, self.contract, self.patches),
            distributions=self.dists, constraints={CONSTRAINT: memory_constraint(result, self.contract)}))

    def ask(self, history: list[TrialResult]) -> Proposal | None:
        self.rejected = 0
        if len(measured_keys(history)) >= self.space.size():
            return None
        self._sync(history)
        trial = self._study.ask(self.dists)
        while self.rejected < self.max_rejected and not self.runnable.is_valid(from_params(trial.params)):
            self._study.tell(trial, state=optuna.trial.TrialState.FAIL)
            self.rejected += 1
            trial = self._study.ask(self.dists)
        self._asked = trial
        return Proposal(from_params(trial.params), f"optuna {self.name}")
