"""Several `infrarsi run` workers, each in its own process and checkout, sharing one study (and one
experience bank) in a real PostgreSQL server, running real trials of the paced workload."""

from __future__ import annotations

import os
import signal
import time

import optuna
import psutil
import pytest
from optuna.trial import TrialState

from infrarsi.contract import VerifyPolicy
from infrarsi.experiment.shared_round import CLAIM, MEASURING
from infrarsi.experiment.store import BEGAN_ATTR, DUPLICATE_ATTR, INTERRUPTED_ATTR, KIND_ATTR, OUTCOME_ATTR, RESULT_ATTR
from infrarsi.study_codec import from_params
from infrarsi.trials import Candidate

from .conftest import HEARTBEAT_S, checkout, finish_worker, start_worker, wait_for

pytestmark = pytest.mark.e2e


def _study(pg_url: str, name: str) -> optuna.Study:
    names = [s.study_name for s in optuna.get_all_study_summaries(pg_url)]
    assert names == [name], f"expected the one shared study {name}, found {names}"
    return optuna.load_study(study_name=name, storage=pg_url)


def _measured(trials) -> list:
    """Trials that measured their candidate. Both workers share one machine, so one's job may
    disturb the other's trial: a disturbed trial measured nothing, its rerun does."""
    return [t for t in trials if t.user_attrs.get(KIND_ATTR) in MEASURING and RESULT_ATTR in t.user_attrs
            and t.user_attrs[RESULT_ATTR]["status"] != "disturbed"]


def _table(trials) -> str:
    """Each trial's kind, status and reason: what a failed count means."""
    return "\n".join(f"{t.number} {t.state.name} {t.user_attrs.get(KIND_ATTR)} "
                     f"{(t.user_attrs.get(RESULT_ATTR) or {}).get('status')} {t.user_attrs.get('reason', '')!r} "
                     f"{'duplicate' if DUPLICATE_ATTR in t.user_attrs else ''}" for t in trials)


def test_two_workers_share_one_study(paced_prepared, pg_url, tmp_path):
    logs = [tmp_path / "a.json", tmp_path / "b.json"]
    procs = [start_worker(checkout(paced_prepared, tmp_path / name), pg_url, trials=4, log=log)
             for name, log in zip(("a", "b"), logs, strict=True)]
    a, b = (finish_worker(p, log) for p, log in zip(procs, logs, strict=True))

    assert a["study_name"] == b["study_name"]
    study = _study(pg_url, a["study_name"])
    trials = study.get_trials(deepcopy=False)
    assert not [t.number for t in trials if t.state is TrialState.RUNNING], "a trial was left running"

    # No candidate measured twice: both workers started at once and asked with the same history.
    measured = _measured(trials)
    keys = [from_params(t.params).key() for t in measured]
    assert len(keys) == len(set(keys)), f"a candidate ran twice: {sorted(keys)}"
    assert [t.user_attrs[KIND_ATTR] for t in measured].count("baseline") == 1
    # Both workers' search trials are in the one study (each ran at least one of them). The two
    # share 2 cores, so a trial may stay disturbed through its reruns: it ran, and measured nothing.
    ran = [t for t in trials if t.user_attrs.get(KIND_ATTR) == "search" and RESULT_ATTR in t.user_attrs]
    assert len({from_params(t.params).key() for t in ran}) >= 4, _table(trials)
    # Trials that gave way to another worker's identical candidate never ran and cost nothing.
    assert all(RESULT_ATTR not in t.user_attrs for t in trials if DUPLICATE_ATTR in t.user_attrs)

    # Verification ran once: one claim with an outcome, one sequence of interleaved rounds.
    outcomes = [t for t in trials if t.user_attrs.get(KIND_ATTR) == CLAIM and OUTCOME_ATTR in t.user_attrs]
    assert len(outcomes) == 1
    outcome = outcomes[0].user_attrs[OUTCOME_ATTR]
    # Each round runs every arm still in it twice (the long and the short length; whole_process.py):
    # the baseline every round, a candidate until it is decided.
    runs: dict[str, int] = {}
    for t in trials:
        if t.user_attrs.get(KIND_ATTR) == "verification" and (t.user_attrs.get(RESULT_ATTR) or {}).get("status") != "disturbed":
            key = from_params(t.params).key()  # a disturbed round's rerun is that round: counted once
            runs[key] = runs.get(key, 0) + 1
    baseline = next(t for t in measured if t.user_attrs[KIND_ATTR] == "baseline")
    base = runs.pop(from_params(baseline.params).key(), 0)
    policy = VerifyPolicy()
    assert base % 2 == 0 and 2 * policy.least_rounds <= base <= 2 * policy.most_rounds, runs
    assert len(runs) <= len(outcome["verdicts"]) and all(n <= base for n in runs.values()), runs
    messages = [a["message"], b["message"]]
    assert sum(m.startswith("verified by another worker") for m in messages) == 1, messages
    assert a["status"] == b["status"] == outcome["status"]
    assert a["promoted"] == b["promoted"] == outcome["promoted"]
    # The paced workload's fastest settings are known by construction: the promoted one is fast.
    if outcome["promoted"]:
        assert outcome["promoted"]["candidate"]["knobs"]["micro_batch_size"] >= 8

    # Each worker's summary lists every trial of the study, the other's included.
    assert {t["number"] for t in a["trials"]} == {t["number"] for t in b["trials"]} >= {t.number for t in measured}


def test_killed_worker_loses_no_trial(paced_prepared, pg_url, tmp_path):
    """Kill worker A with SIGKILL while its baseline trial runs: the trial process dies with it,
    worker B fails the stale trial (costed, marked interrupted) and runs the baseline itself."""
    log_a, log_b = tmp_path / "a.json", tmp_path / "b.json"
    a = start_worker(checkout(paced_prepared, tmp_path / "a"), pg_url, trials=2, log=log_a)
    try:
        worker = psutil.Process(a.pid)

        def trial_running():  # the baseline's train.py, well into its run
            for child in worker.children(recursive=True):
                try:
                    if "train.py" in " ".join(child.cmdline()) and time.time() - child.create_time() > 1.2:
                        return child
                except psutil.Error:
                    pass
            return None

        child = wait_for(trial_running, 120, "worker A's trial process")
        b = start_worker(checkout(paced_prepared, tmp_path / "b"), pg_url, trials=2, log=log_b)
        time.sleep(0.3)
        assert child.is_running() and a.poll() is None
        killed_at = time.time()
        os.kill(a.pid, signal.SIGKILL)
        a.wait(10)
    finally:
        if a.poll() is None:
            a.kill()
    # The kernel takes the trial down with its worker: nothing keeps computing for a dead worker.
    _gone, alive = psutil.wait_procs([child], timeout=10)
    assert not alive, "the killed worker's trial process is still running"

    result = finish_worker(b, log_b)
    trials = _study(pg_url, result["study_name"]).get_trials(deepcopy=False)
    assert not [t.number for t in trials if t.state is TrialState.RUNNING], "a trial was left running"
    interrupted = [t for t in trials if INTERRUPTED_ATTR in t.user_attrs]
    assert len(interrupted) == 1, [(t.number, t.user_attrs) for t in interrupted]
    dead = interrupted[0]
    assert dead.state is TrialState.FAIL and dead.user_attrs[KIND_ATTR] == "baseline"
    assert RESULT_ATTR not in dead.user_attrs and "heartbeats" in dead.user_attrs["interrupted_by"]
    # Its cost: from its start to its last heartbeat, so within about a beat of the kill.
    ran = killed_at - dead.user_attrs[BEGAN_ATTR]
    cost = dead.user_attrs[INTERRUPTED_ATTR]
    assert ran - 2 * HEARTBEAT_S - 1.0 <= cost <= ran + 0.5, (cost, ran)
    assert result["interrupted_s"] == pytest.approx(cost)
    assert result["spent_s"] > 0

    # Not lost: B ran the baseline again (after A's went stale), searched, and verified itself.
    baseline = Candidate(knobs=from_params(dead.params).knobs).key()
    reruns = [t for t in _measured(trials) if t.user_attrs[KIND_ATTR] == "baseline"]
    assert len(reruns) == 1 and from_params(reruns[0].params).key() == baseline
    assert reruns[0].number > dead.number and reruns[0].state is TrialState.COMPLETE
    assert result["status"] in ("ok", "no_promotion"), result["message"]
    assert not result["message"].startswith("verified by another worker")
    assert len([t for t in trials if t.user_attrs.get(KIND_ATTR) == CLAIM and OUTCOME_ATTR in t.user_attrs]) == 1
