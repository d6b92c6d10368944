"""Every use of Optuna's private API, in one place.

InfraRSI drives a study by ask/tell from several workers, which Optuna's public API does not
cover: a trial created with its params in one transaction (an enqueued trial would be popped by
whichever worker asks first), a heartbeat for ask/tell trials, and failing stale trials with the
cost recorded first (``optuna.storages.fail_stale_trials`` fails them before anything can be
written on them). ``tests/experiment/test_optuna_adapter.py`` pins each name used here against the installed
Optuna, so an upgrade that moves one fails a test instead of a run.
"""

from __future__ import annotations

import optuna


def storage_of(study: optuna.Study) -> optuna.storages.BaseStorage:
    return study._storage


def study_id(study: optuna.Study) -> int:
    return study._study_id


def trial_id(trial: optuna.Trial) -> int:
    return trial._trial_id


def backend(storage: optuna.storages.BaseStorage) -> optuna.storages.BaseStorage:
    """The RDB storage under Optuna's caching wrapper (a study's storage)."""
    return getattr(storage, "_backend", storage)


def heartbeat_interval(storage: optuna.storages.BaseStorage) -> int | None:
    getter = getattr(storage, "get_heartbeat_interval", None)
    return getter() if getter is not None else None


def stale_trial_ids(study: optuna.Study) -> list[int]:
    """Running trials whose heartbeat is older than the storage's grace period; [] without heartbeats."""
    storage = backend(storage_of(study))
    if not heartbeat_interval(storage) or not hasattr(storage, "_get_stale_trial_ids"):
        return []
    return list(storage._get_stale_trial_ids(study_id(study)))


def create_running_trial(study: optuna.Study, template: optuna.trial.FrozenTrial) -> optuna.Trial:
    """A RUNNING trial with ``template``'s params and attributes, created in one storage call."""
    new_id = storage_of(study).create_new_trial(study_id(study), template_trial=template)
    return optuna.Trial(study, new_id)
