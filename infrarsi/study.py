"""The trial store: an Optuna study (ask/tell) holding every trial's full result.

SQLite under ``.infrarsi/`` by default, any Optuna storage URL otherwise (PostgreSQL for a team,
``journal:<file>`` for a journal file), so a stopped run continues where it was and several workers
can share one study. Each trial keeps its candidate as Optuna params (one categorical per tunable
knob, one on/off per patch) and its whole :class:`TrialResult` as a user attribute.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import math
import threading
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import optuna
from optuna.distributions import CategoricalDistribution
from optuna.trial import TrialState

from infrarsi.contract import STATE_DIR, Contract
from infrarsi.runner.result import Candidate, TrialResult, TrialStatus
from infrarsi.verification import job_seconds

optuna.logging.set_verbosity(logging.WARNING)
# Heartbeats are experimental in Optuna and it expects them only under Study.optimize; we drive
# them ourselves for ask/tell (see TrialStore.heartbeat).
warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)
warnings.filterwarnings("ignore", message="Heartbeat of storage is supposed to be used")

PATCH_PREFIX = "patch:"
RESULT_ATTR = "result"
INTERRUPTED_ATTR = "interrupted_s"
KIND_ATTR = "kind"
"""baseline | validation | search | verification."""


def default_storage_url(repo: Path) -> str:
    return f"sqlite:///{(Path(repo) / STATE_DIR / 'study.db').resolve()}"


def open_storage(url: str) -> optuna.storages.BaseStorage:
    if url.startswith("journal:"):
        from optuna.storages.journal import JournalFileBackend

        return optuna.storages.JournalStorage(JournalFileBackend(url.removeprefix("journal:")))
    # The heartbeat lets a surviving worker fail the trial of one that was killed mid-run.
    return optuna.storages.RDBStorage(url, heartbeat_interval=30, grace_period=90)


def study_name(contract: Contract) -> str:
    """One study per workload: the contract minus what doctor refines (reference losses)."""
    data = contract.to_dict()
    data["loss"].pop("reference", None)
    data["loss"].pop("tolerance", None)
    data["loss"].pop("numerics_tolerance", None)
    digest = hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:12]
    return f"infrarsi-{digest}"


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


@dataclass(slots=True)
class StoredTrial:
    number: int
    kind: str
    result: TrialResult


class TrialStore:
    """Ask/tell over one Optuna study, in InfraRSI's terms."""

    def __init__(self, study: optuna.Study, contract: Contract, patches: list[str]):
        self.study = study
        self.contract = contract
        self.patches = patches

    @classmethod
    def open(
        cls,
        contract: Contract,
        patches: list[str],
        *,
        storage_url: str,
        sampler: optuna.samplers.BaseSampler | None = None,
    ) -> TrialStore:
        study = optuna.create_study(
            study_name=study_name(contract),
            storage=open_storage(storage_url),
            sampler=sampler,
            direction="minimize",
            load_if_exists=True,
        )
        return cls(study, contract, patches)

    def begin(self, candidate: Candidate | None, kind: str) -> optuna.Trial:
        """Start a trial: a given candidate (enqueued, then asked) or the study sampler's choice."""
        if candidate is not None:
            self.study.enqueue_trial(to_params(candidate, self.contract, self.patches), skip_if_exists=False)
        trial = self.study.ask(distributions(self.contract, self.patches))
        trial.set_user_attr(KIND_ATTR, kind)
        return trial

    def candidate_of(self, trial: optuna.Trial) -> Candidate:
        return from_params(trial.params)

    def finish(self, trial: optuna.Trial, result: TrialResult, *, oom_as_constraint: bool = False) -> None:
        trial.set_user_attr(RESULT_ATTR, result.to_dict())
        value = job_seconds(result, self.contract.workload.planned_steps) if result.ok else None
        if oom_as_constraint:
            over = (result.peak_bytes or self.contract.memory.budget_bytes) - self.contract.memory.budget_bytes
            trial.set_constraint("memory", float(max(over, 1) if result.status is TrialStatus.OOM else -1))
        if value is not None and math.isfinite(value):
            self.study.tell(trial, value)
        elif result.status is TrialStatus.ABORTED_SLOW:
            self.study.tell(trial, state=TrialState.PRUNED)
        else:
            self.study.tell(trial, state=TrialState.FAIL)

    def interrupted(self, trial: optuna.Trial, wall_s: float) -> None:
        """A trial stopped by the user or a dying worker: failed, its cost kept, never a verdict on the candidate."""
        trial.set_user_attr(INTERRUPTED_ATTR, wall_s)
        self.study.tell(trial, state=TrialState.FAIL)

    def fail_stale(self) -> None:
        """Fail trials whose worker stopped sending heartbeats (killed mid-trial on another machine)."""
        optuna.storages.fail_stale_trials(self.study)

    @contextlib.contextmanager
    def heartbeat(self, trial: optuna.Trial) -> Iterator[None]:
        """Keep a trial alive in the storage while it runs (ask/tell gets no heartbeat from Optuna)."""
        storage = self.study._storage
        interval = storage.get_heartbeat_interval() if hasattr(storage, "get_heartbeat_interval") else None
        if not interval:
            yield
            return
        stop = threading.Event()

        def beat() -> None:
            while not stop.wait(interval):
                storage.record_heartbeat(trial._trial_id)

        storage.record_heartbeat(trial._trial_id)
        thread = threading.Thread(target=beat, name="infrarsi-heartbeat", daemon=True)
        thread.start()
        try:
            yield
        finally:
            stop.set()
            thread.join()

    def interrupted_seconds(self) -> float:
        return sum(float(t.user_attrs.get(INTERRUPTED_ATTR, 0.0)) for t in self.study.get_trials(deepcopy=False))

    def trials(self, kinds: tuple[str, ...] | None = None) -> list[StoredTrial]:
        out = []
        for t in self.study.get_trials(deepcopy=False):
            data = t.user_attrs.get(RESULT_ATTR)
            kind = t.user_attrs.get(KIND_ATTR, "search")
            if data is None or (kinds is not None and kind not in kinds):
                continue
            out.append(StoredTrial(t.number, kind, TrialResult.from_dict(data)))
        return out

    def history(self) -> list[TrialResult]:
        """Every measured trial of every kind: all are real data for the models."""
        return [s.result for s in self.trials()]
