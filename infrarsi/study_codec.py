"""Candidates as Optuna params and trial results as Optuna's outcome: the codec the trial store
(``experiment/store.py``) and the Optuna peers (``search/optuna_samplers.py``) share, below both,
as Optuna's own ``distributions`` module sits under its samplers and storages.

A candidate is one categorical per tunable knob (its domain) and one on/off per patch
(``PATCH_PREFIX`` + the patch's name)."""

from __future__ import annotations

import math
from typing import Any

from optuna.distributions import CategoricalDistribution
from optuna.trial import TrialState

from infrarsi.contract import Contract
from infrarsi.settings import PATCH_PREFIX
from infrarsi.trials import Candidate, TrialResult, TrialStatus
from infrarsi.whole_process import job_seconds


def distributions(contract: Contract, patches: list[str]) -> dict[str, CategoricalDistribution]:
    dists: dict[str, CategoricalDistribution] = {
        k.name: CategoricalDistribution(list(k.domain)) for k in contract.tunable
    }
    for name in patches:
        dists[PATCH_PREFIX + name] = CategoricalDistribution([False, True])
    return dists


def to_params(candidate: Candidate, contract: Contract, patches: list[str]) -> dict[str, Any]:
    params: dict[str, Any] = {k.name: candidate.knobs.get(k.name, k.default) for k in contract.tunable}
    for name in patches:
        params[PATCH_PREFIX + name] = name in candidate.patches
    return params


def from_params(params: dict[str, Any]) -> Candidate:
    knobs = {k: v for k, v in params.items() if not k.startswith(PATCH_PREFIX)}
    patches = tuple(sorted(k.removeprefix(PATCH_PREFIX) for k, v in params.items() if k.startswith(PATCH_PREFIX) and v))
    return Candidate(knobs=knobs, patches=patches)


def outcome(result: TrialResult, contract: Contract) -> tuple[TrialState, float | None]:
    """What a trial's result is to Optuna: its job seconds (complete), pruned (aborted as slow), or failed."""
    value = job_seconds(result, contract.workload.planned_steps) if result.ok else None
    if value is not None and math.isfinite(value):
        return TrialState.COMPLETE, value
    return (TrialState.PRUNED if result.status is TrialStatus.ABORTED_SLOW else TrialState.FAIL), None


def memory_constraint(result: TrialResult, contract: Contract) -> float:
    """Optuna's constraint convention for memory (feasible at zero or less): an OOM is positive (the excess)."""
    over = (result.peak_bytes or contract.memory.budget_bytes) - contract.memory.budget_bytes
    return float(max(over, 1) if result.status is TrialStatus.OOM else -1)
