"""The trial store: an Optuna study holding every trial's full result, each trial begun with the
candidate a strategy's sampler chose (the study's own sampler is never asked).

SQLite under ``.infrarsi/`` by default, any Optuna storage URL otherwise (PostgreSQL for a team,
``journal:<file>`` for a journal file), so a stopped run continues where it was and several workers
can share one study. Each trial keeps its candidate as Optuna params (one categorical per tunable
knob, one on/off per patch) and its whole :class:`TrialResult` as a user attribute.

The store is the one reader and writer of a trial's attributes and state, so the keys stay in one
place and older studies keep loading: its callers hold a begun trial as a :class:`RunningTrial`
and read typed values (:class:`StoredTrial`, :class:`TrialRecord`, :class:`State`).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import threading
import time
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Any

import optuna
from optuna.trial import TrialState

from infrarsi.contract import Contract
from infrarsi.experiment import optuna_adapter as adapter
from infrarsi.experiment.concluded import Conclusion
from infrarsi.records.files import study_path
from infrarsi.study_codec import distributions, from_params, outcome, to_params
from infrarsi.trials import Candidate, TrialResult

optuna.logging.set_verbosity(logging.WARNING)
# Heartbeats are experimental in Optuna and it expects them only under Study.optimize; we drive
# them ourselves for ask/tell (see TrialStore.heartbeat).
warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)
warnings.filterwarnings("ignore", message="Heartbeat of storage is supposed to be used")

RESULT_ATTR = "result"
INTERRUPTED_ATTR = "interrupted_s"
KIND_ATTR = "kind"
"""baseline | validation | search | verification | claim (a worker's bid to run verification)."""
BEGAN_ATTR = "began_at"
"""Wall-clock start of the trial (epoch seconds, the worker's clock)."""
ALIVE_ATTR = "alive_at"
"""The worker's clock at its latest heartbeat: a trial failed as stale cost ``alive_at - began_at``."""
DUPLICATE_ATTR = "duplicate_of"
"""Set on a trial given up before it ran because another worker had begun the same candidate."""
REASON_ATTR = "reason"
"""Why the trial ran, in words."""
RERUN_OF_ATTR = "rerun_of"
"""The number of the disturbed trial this one reruns."""
ROUND_FROM_ATTR = "round_from"
"""On a claim: the first trial number of the round whose verification it bids for."""
OUTCOME_ATTR = "outcome"
"""On the claim that won its round: the verification's outcome, for the workers that deferred."""
DEFERRED_ATTR = "deferred_to"
"""On a claim that lost: the number of the claim it deferred to."""
HEARTBEAT_ENV = "INFRARSI_HEARTBEAT_S"
GRACE_ENV = "INFRARSI_HEARTBEAT_GRACE_S"
LIVE_STATES = (TrialState.RUNNING, TrialState.COMPLETE, TrialState.PRUNED)


def default_storage_url(repo: Path) -> str:
    return f"sqlite:///{study_path(repo).resolve()}"


def hide_password(url: str) -> str:
    """``url`` as it may be stored and shown: a database password replaced by ``***``."""
    if url.startswith("journal:"):
        return url
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    try:
        return make_url(url).render_as_string(hide_password=True)
    except (ArgumentError, ValueError):
        return url


def password_hidden(url: str) -> bool:
    """Whether ``url`` is a stored one whose password was hidden (it cannot be opened as it is)."""
    return hide_password(url) == url and ":***@" in url


def open_storage(url: str) -> optuna.storages.BaseStorage:
    if url.startswith("journal:"):
        from optuna.storages.journal import JournalFileBackend

        return optuna.storages.JournalStorage(JournalFileBackend(url.removeprefix("journal:")))
    # The heartbeat lets a surviving worker fail the trial of one that was killed mid-run; shorter
    # through the environment (tests), whole seconds as Optuna wants.
    interval = max(1, int(os.environ.get(HEARTBEAT_ENV, "30")))
    grace = max(interval + 1, int(os.environ.get(GRACE_ENV, str(3 * interval))))
    for attempt in range(6):
        try:
            return optuna.storages.RDBStorage(url, heartbeat_interval=interval, grace_period=grace)
        except Exception as err:  # workers starting together on a fresh database race to create the schema
            if attempt == 5 or "already exists" not in str(err):
                raise
            time.sleep(0.2 + attempt * 0.5)
    raise AssertionError("unreachable")


def study_name(contract: Contract) -> str:
    """One study per workload: the contract minus what doctor refines (reference losses)."""
    data = contract.to_dict()
    data["loss"].pop("reference", None)
    data["loss"].pop("tolerance", None)
    data["loss"].pop("numerics_tolerance", None)
    digest = hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:12]
    return f"infrarsi-{digest}"


def grace_period_s(storage: optuna.storages.BaseStorage) -> float:
    backend = adapter.backend(storage)
    interval = adapter.heartbeat_interval(backend) or 0
    return float(getattr(backend, "grace_period", None) or 2 * interval)


class State(Enum):
    """A stored trial's state as the store's callers read it: Optuna's ``TrialState`` by name (every
    one, so any stored trial reads), which no caller needs to import."""

    RUNNING = "running"
    COMPLETE = "complete"
    PRUNED = "pruned"
    FAIL = "fail"
    WAITING = "waiting"


@dataclass(frozen=True, slots=True)
class RunningTrial:
    """A trial begun and not yet ended: its number is the caller's to read; the Optuna trial is
    only handed back to the store, the one reader and writer of its attributes and state."""

    number: int
    optuna_trial: optuna.Trial


@dataclass(slots=True)
class StoredTrial:
    number: int
    kind: str
    result: TrialResult
    reason: str
    """Why it ran, in words ("" where none was stored)."""
    rerun_of: int | None
    """The disturbed trial it reruns."""


@dataclass(frozen=True, slots=True)
class TrialRecord:
    """Any stored trial, decoded, whatever its state (a claim, a trial given up, one still running):
    what workers sharing the study read of each other's steps (experiment/shared_round.py)."""

    number: int
    kind: str
    state: State
    candidate: Candidate | None
    """None: a marker (a claim), which has no params."""
    result: TrialResult | None
    duplicate_of: int | None
    outcome: Conclusion | None
    """A claim that won its round: what its verification concluded."""
    deferred_to: int | None


class TrialStore:
    """Begin/finish over one Optuna study, in InfraRSI's terms."""

    def __init__(self, study: optuna.Study, contract: Contract, patches: list[str]):
        self.study = study
        self.contract = contract
        self.patches = patches

    @classmethod
    def open(cls, contract: Contract, patches: list[str], *, storage_url: str) -> TrialStore:
        # The study's own sampler is never asked: every candidate comes from a strategy's sampler
        # (Optuna's included, over a study of its own: search/optuna_samplers.py).
        study = optuna.create_study(
            study_name=study_name(contract),
            storage=open_storage(storage_url),
            sampler=optuna.samplers.RandomSampler(),
            direction="minimize",
            load_if_exists=True,
        )
        return cls(study, contract, patches)

    @classmethod
    def existing(cls, contract: Contract, *, storage_url: str, name: str) -> TrialStore:
        """The study ``name`` at ``storage_url``, to read (the report); KeyError when it is not there:
        unlike ``open``, it creates nothing."""
        return cls(optuna.load_study(study_name=name, storage=open_storage(storage_url)), contract, [])

    def begin(self, candidate: Candidate, kind: str) -> RunningTrial:
        """Start a trial of ``candidate``, created in one storage transaction with its params and
        kind (not enqueued and asked: with several workers on one study, an ask pops whichever
        worker's enqueued trial is oldest). Its heartbeat starts at once, so a worker killed right
        after still leaves a trial that goes stale and is failed."""
        trial = self._create(to_params(candidate, self.contract, self.patches),
                             distributions(self.contract, self.patches), kind)
        self._beat(adapter.trial_id(trial.optuna_trial))
        return trial

    def marker(self, kind: str, *, round_from: int) -> RunningTrial:
        """A running trial without params that marks a worker's step (a claim on the verification of
        the round that began at trial ``round_from``)."""
        trial = self._create({}, {}, kind, **{ROUND_FROM_ATTR: round_from})
        self._beat(adapter.trial_id(trial.optuna_trial))
        return trial

    def _create(self, params: dict[str, Any], dists: dict[str, Any], kind: str, **attrs: Any) -> RunningTrial:
        import datetime as dt

        template = optuna.trial.FrozenTrial(
            number=-1, state=TrialState.RUNNING, value=None, datetime_start=dt.datetime.now(),
            datetime_complete=None, params=params, distributions=dists,
            user_attrs={KIND_ATTR: kind, BEGAN_ATTR: time.time(), **attrs}, system_attrs={},
            intermediate_values={}, trial_id=-1,
        )
        trial = adapter.create_running_trial(self.study, template)
        return RunningTrial(trial.number, trial)

    def _beat(self, trial_id: int) -> None:
        storage: Any = adapter.storage_of(self.study)  # record_heartbeat: the heartbeat storages' (RDB)
        if adapter.heartbeat_interval(storage):
            storage.record_heartbeat(trial_id)

    def _frozen(self, states: tuple[TrialState, ...] | None = None) -> list[optuna.trial.FrozenTrial]:
        return self.study.get_trials(deepcopy=False, states=states)

    def count(self) -> int:
        """How many trials the study holds, of every kind and state."""
        return len(self._frozen())

    def records(self, states: tuple[State, ...] | None = None) -> list[TrialRecord]:
        """Every trial in one of ``states`` (None: every trial), decoded."""
        wanted = None if states is None else tuple(TrialState[s.name] for s in states)
        return [self._record(t) for t in self._frozen(wanted)]

    @staticmethod
    def _record(t: optuna.trial.FrozenTrial) -> TrialRecord:
        attrs = t.user_attrs
        data, concluded = attrs.get(RESULT_ATTR), attrs.get(OUTCOME_ATTR)
        return TrialRecord(
            number=t.number, kind=attrs.get(KIND_ATTR, "search"), state=State[t.state.name],
            candidate=from_params(t.params) if t.params else None,
            result=TrialResult.from_dict(data) if data is not None else None,
            duplicate_of=attrs.get(DUPLICATE_ATTR),
            outcome=Conclusion.from_dict(concluded) if concluded is not None else None,
            deferred_to=attrs.get(DEFERRED_ATTR),
        )

    def running_candidates(self, kinds: tuple[str, ...], *, exclude: int | None = None) -> list[Candidate]:
        """Candidates other workers are running now: taken, so not proposed again."""
        return [from_params(t.params) for t in self._frozen((TrialState.RUNNING,))
                if t.user_attrs.get(KIND_ATTR) in kinds and t.params and t.number != exclude]

    def earlier_duplicate(self, trial: RunningTrial, kinds: tuple[str, ...]) -> int | None:
        """The number of a live trial of the same candidate and kind begun before ``trial`` (by
        trial number, which the storage assigns atomically): the race two workers asking at once can lose."""
        mine = self.candidate_of(trial).key()
        for t in self._frozen(LIVE_STATES):
            if (t.number < trial.number and t.params and t.user_attrs.get(KIND_ATTR) in kinds
                    and DUPLICATE_ATTR not in t.user_attrs and from_params(t.params).key() == mine):
                return t.number
        return None

    def give_up(self, trial: RunningTrial, duplicate_of: int) -> None:
        """Close a trial that never ran (no result, no cost): another worker runs its candidate."""
        trial.optuna_trial.set_user_attr(DUPLICATE_ATTR, duplicate_of)
        self.study.tell(trial.optuna_trial, state=TrialState.FAIL)

    def grace_s(self) -> float:
        """How long a running trial may go without a heartbeat before it is failed as stale."""
        return grace_period_s(adapter.storage_of(self.study))

    def close(self, trial: RunningTrial, state: State) -> None:
        """End a trial that carries no result (a claim, a deferral) in ``state``."""
        self.study.tell(trial.optuna_trial, state=TrialState[state.name])

    def settle(self, claim: RunningTrial, conclusion: Conclusion) -> None:
        """End the claim that won its round, the verification's ``conclusion`` stored on it."""
        claim.optuna_trial.set_user_attr(OUTCOME_ATTR, conclusion.to_dict())
        self.close(claim, State.PRUNED)

    def defer(self, claim: RunningTrial, winner: int) -> None:
        """End a claim that lost to the claim numbered ``winner``."""
        claim.optuna_trial.set_user_attr(DEFERRED_ATTR, winner)
        self.close(claim, State.PRUNED)

    def explain(self, trial: RunningTrial, reason: str, *, rerun_of: int | None = None) -> None:
        """Store why ``trial`` runs and, for a rerun, the number of the disturbed trial it repeats."""
        trial.optuna_trial.set_user_attr(REASON_ATTR, reason)
        if rerun_of is not None:
            trial.optuna_trial.set_user_attr(RERUN_OF_ATTR, rerun_of)

    def candidate_of(self, trial: RunningTrial) -> Candidate:
        return from_params(trial.optuna_trial.params)

    def finish(self, trial: RunningTrial, result: TrialResult) -> None:
        trial.optuna_trial.set_user_attr(RESULT_ATTR, result.to_dict())
        state, value = outcome(result, self.contract)
        self.study.tell(trial.optuna_trial, value, state=state)

    def interrupted(self, trial: RunningTrial, wall_s: float) -> None:
        """A trial stopped by the user or a dying worker: failed, its cost kept, never a verdict on the candidate."""
        trial.optuna_trial.set_user_attr(INTERRUPTED_ATTR, wall_s)
        self.study.tell(trial.optuna_trial, state=TrialState.FAIL)

    def fail_stale(self) -> list[int]:
        """Fail trials whose worker stopped sending heartbeats (killed mid-trial, here or on another
        machine): each is marked interrupted and costed from its start to its last heartbeat. Safe
        when several workers do it at once. Returns the numbers of the trials this call failed."""
        storage = adapter.backend(adapter.storage_of(self.study))
        failed = []
        for trial_id in adapter.stale_trial_ids(self.study):
            try:
                frozen = storage.get_trial(trial_id)
                attrs = frozen.user_attrs
                began = attrs.get(BEGAN_ATTR, frozen.datetime_start.timestamp() if frozen.datetime_start else None)
                alive: Any = attrs.get(ALIVE_ATTR, began)
                cost = max(0.0, float(alive) - float(began)) if began is not None else 0.0
                storage.set_trial_user_attr(trial_id, INTERRUPTED_ATTR, cost)
                storage.set_trial_user_attr(trial_id, "interrupted_by", "worker stopped sending heartbeats")
                if storage.set_trial_state_values(trial_id, state=TrialState.FAIL):
                    failed.append(frozen.number)
            except optuna.exceptions.UpdateFinishedTrialError:
                pass  # another worker failed it first
        return failed

    @contextlib.contextmanager
    def heartbeat(self, trial: RunningTrial) -> Iterator[None]:
        """Keep a trial alive in the storage while it runs (ask/tell gets no heartbeat from Optuna)."""
        storage: Any = adapter.storage_of(self.study)  # record_heartbeat: the heartbeat storages' (RDB)
        interval = adapter.heartbeat_interval(storage)
        if not interval:
            yield
            return
        stop = threading.Event()
        trial_id = adapter.trial_id(trial.optuna_trial)

        def beat() -> None:
            while not stop.wait(interval):
                with contextlib.suppress(Exception):  # a lost beat is retried; the trial must not die of it
                    storage.set_trial_user_attr(trial_id, ALIVE_ATTR, time.time())
                    storage.record_heartbeat(trial_id)

        storage.record_heartbeat(trial_id)
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
            out.append(StoredTrial(t.number, kind, TrialResult.from_dict(data), t.user_attrs.get(REASON_ATTR, ""),
                                   t.user_attrs.get(RERUN_OF_ATTR)))
        return out

    def history(self) -> list[TrialResult]:
        """Every measured trial of every kind: all are real data for the models."""
        return [s.result for s in self.trials()]
