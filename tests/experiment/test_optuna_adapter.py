"""What infrarsi/experiment/optuna_adapter.py relies on in Optuna's private API, pinned against the installed
Optuna: an upgrade that renames or drops one fails here, not in a multi-worker run."""

from __future__ import annotations

import datetime as dt
import time

import optuna
from optuna.trial import TrialState

from infrarsi.experiment import optuna_adapter as adapter


def _template(**params: bool) -> optuna.trial.FrozenTrial:
    dists = {k: optuna.distributions.CategoricalDistribution([False, True]) for k in params}
    return optuna.trial.FrozenTrial(
        number=-1, state=TrialState.RUNNING, value=None, datetime_start=dt.datetime.now(), datetime_complete=None,
        params=params, distributions=dists, user_attrs={"kind": "search"}, system_attrs={}, intermediate_values={},
        trial_id=-1)


def test_the_private_names_the_adapter_uses_still_work(tmp_path):
    storage = optuna.storages.RDBStorage(f"sqlite:///{tmp_path / 'study.db'}", heartbeat_interval=1, grace_period=2)
    study = optuna.create_study(study_name="pin", storage=storage)
    assert isinstance(adapter.backend(adapter.storage_of(study)), optuna.storages.RDBStorage)
    assert adapter.heartbeat_interval(adapter.storage_of(study)) == 1
    assert isinstance(adapter.study_id(study), int)

    trial = adapter.create_running_trial(study, _template(compile=True))
    assert trial.params == {"compile": True} and trial.user_attrs == {"kind": "search"}
    frozen = next(t for t in study.get_trials(deepcopy=False) if t.number == trial.number)
    assert frozen.state is TrialState.RUNNING and frozen._trial_id == adapter.trial_id(trial)

    adapter.storage_of(study).record_heartbeat(adapter.trial_id(trial))
    assert adapter.stale_trial_ids(study) == []
    time.sleep(3.2)  # past the grace period: the trial's worker looks dead
    assert adapter.stale_trial_ids(study) == [adapter.trial_id(trial)]


def test_without_heartbeats_nothing_is_stale(tmp_path):
    study = optuna.create_study(storage=f"sqlite:///{tmp_path / 'study.db'}")
    adapter.create_running_trial(study, _template())
    assert adapter.heartbeat_interval(adapter.storage_of(study)) is None
    assert adapter.stale_trial_ids(study) == []


def test_no_other_module_reaches_into_optuna():
    import re
    from pathlib import Path

    root = Path(adapter.__file__).resolve().parents[1]  # the infrarsi package
    private = re.compile(r"\.(_storage|_study_id|_trial_id|_backend|_get_stale_trial_ids)\b")
    found = {p.relative_to(root).as_posix(): m.group(0) for p in root.rglob("*.py")
             if p.name != "optuna_adapter.py" and (m := private.search(p.read_text()))}
    assert found == {}
