"""run on the paced workload: real trials in real processes, a real Optuna SQLite study.

The paced job's step time and memory follow its knobs by construction (tests/stages/conftest.py
has its formula), so these tests know the best setting, which settings cannot fit the 128 MiB
budget, and which are slow enough to be stopped early.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import optuna
import psutil
import pytest
from optuna.trial import TrialState

from infrarsi.contract import VerifyPolicy, load_contract, save_contract
from infrarsi.experiment.search_loop import ABORT_FACTOR
from infrarsi.experiment.store import INTERRUPTED_ATTR, KIND_ATTR, RESULT_ATTR, TrialStore, default_storage_url
from infrarsi.records import load_run
from infrarsi.stages.run import run
from infrarsi.trials import Candidate, TrialStatus
from tests.stages.conftest import BEST, RUN_TRIALS, budget_kinds, copy_repo, paced_fits, paced_step_s

INFRARSI = Path(sys.executable).parent / "infrarsi"
MEASURED_KINDS = ("baseline", "validation", "search", "verification")


def _store(repo: Path) -> TrialStore:
    return TrialStore.open(load_contract(repo), [], storage_url=default_storage_url(repo))


def test_run_promotes_the_known_best_within_twelve_trials(paced_run):
    repo, result = paced_run
    assert result.status == "ok", result.message
    promoted = result.promoted
    assert promoted is not None and promoted.promoted
    point, low, high = promoted.job_speedup
    assert low > 1 and low > result.noise_floor and low <= point <= high
    # The known best, or a setting its own reruns cannot tell from it: the best was re-verified too,
    # and the two speedup intervals overlap (the runner-up is 11% slower by construction; on a
    # heavily loaded machine three reruns may not separate them, and the judge prefers the higher
    # low bound).
    if promoted.candidate != Candidate(knobs=BEST):
        best = next((v for v in result.verdicts if v.candidate == Candidate(knobs=BEST)), None)
        assert best is not None, f"the known best was not even re-verified; promoted {promoted.candidate}"
        assert best.job_speedup[1] <= promoted.job_speedup[2] and promoted.job_speedup[1] <= best.job_speedup[2], \
            (best.job_speedup, promoted.job_speedup)
        assert paced_step_s(promoted.candidate.knobs) <= 1.15 * paced_step_s(BEST), promoted.candidate
    assert all(s == "ok" for s in promoted.statuses) and len(promoted.cand_job_s) >= 2
    # The speedup is the paced job's own: its baseline step over its best step (start-up aside).
    assert point == pytest.approx(paced_step_s({}) / paced_step_s(BEST), rel=0.25)
    assert result.message.startswith("promoted:")


def test_every_trial_is_accounted_for_by_status_and_cost(paced_run):
    repo, result = paced_run
    saved = load_run(repo)
    as_json = lambda r: json.loads(json.dumps(r.to_dict(), default=str))  # noqa: E731
    assert as_json(saved) == as_json(result)
    stored = _store(repo).trials()
    study = optuna.load_study(study_name=result.study_name, storage=result.storage_url)
    # Every trial in the study ended; every one that ran a candidate holds its result (markers,
    # such as a claim on verification, run nothing); run.json lists exactly those.
    assert all(t.state in (TrialState.COMPLETE, TrialState.FAIL, TrialState.PRUNED) for t in study.trials)
    measured = [t for t in study.trials if t.user_attrs.get(KIND_ATTR) in MEASURED_KINDS]
    assert measured and all(RESULT_ATTR in t.user_attrs for t in measured)
    assert [(r.number, r.kind, r.status) for r in result.trials] == \
        [(s.number, s.kind, s.result.status.value) for s in stored]
    assert [r.number for r in result.trials] == [t.number for t in measured]
    # The budget counts the baseline and the search; re-verification comes on top.
    kinds = budget_kinds(result.trials)
    spent = kinds.count("baseline") + kinds.count("search")
    assert kinds.count("baseline") == 1
    assert spent == RUN_TRIALS or (spent < RUN_TRIALS and result.search_ended.startswith("converged")), \
        (spent, result.search_ended)
    # Every round runs the baseline and each candidate still in it, each at two lengths (doctor's
    # baseline pair is the first baseline round, never run again).
    rounds = max(len(v.statuses) for v in result.verdicts) // 2
    assert rounds >= 2 and kinds.count("verification") == 2 * rounds + sum(len(v.statuses) for v in result.verdicts)
    valid = {s.value for s in TrialStatus}
    for row in result.trials:
        assert row.status in valid and row.wall_s > 0, row
        assert row.status != "ok" or (row.job_s and row.step_s and row.peak_bytes), row
        if row.status != "ok":
            assert row.detail, row  # a failure says why
    assert result.spent_s == pytest.approx(sum(r.wall_s for r in result.trials))
    # Study state follows status: ok told with its job time, aborted pruned, the rest failed.
    for row, trial in zip(result.trials, measured, strict=True):
        expected = {"ok": TrialState.COMPLETE, "aborted_slow": TrialState.PRUNED}.get(row.status, TrialState.FAIL)
        assert trial.state == expected, (row.number, row.status, trial.state)
        if row.status == "ok":
            assert trial.value == pytest.approx(row.job_s)


def test_the_search_meets_the_budget_and_stops_slow_trials(paced_run):
    _repo, result = paced_run
    search = [r for r in result.trials if r.kind == "search"]
    assert result.search_ended == f"the budget of {RUN_TRIALS} trials" or \
        result.search_ended.startswith("converged: the most promising untried candidate"), result.search_ended
    # Neither an OOM nor a slow trial is required: the memory model may pair micro-batch 16 with
    # checkpointing before ever running it alone, and the search that sees interactions (issue 53)
    # may never run a clearly slower candidate (tests/runner/test_trial.py aborts one directly).
    for row in search:
        knobs = row.candidate["knobs"]
        # OOM exactly where the budget says: micro-batch 16 without checkpointing, and nowhere else.
        assert (row.status == "oom") == (not paced_fits(knobs)), row
        if row.status == "oom":
            assert "budget" in row.detail, row
    # Stopped early only when clearly slower than the incumbent of the moment.
    ok_before: list[float] = []
    for row in sorted(result.trials, key=lambda r: r.number):
        knobs = row.candidate["knobs"]
        if row.status == "aborted_slow":
            assert ok_before and paced_step_s(knobs) > min(ok_before) * ABORT_FACTOR * 0.9, row
            assert row.wall_s < 0.9 * max(r.wall_s for r in result.trials if r.kind == "baseline")
        if row.status == "ok":
            ok_before.append(paced_step_s(knobs))


def test_no_configuration_is_tried_twice_in_the_search(paced_run):
    _repo, result = paced_run
    # A disturbed trial's reruns are that trial again (experiment/quiet.py), so they are left out.
    keys = [Candidate.from_dict(r.candidate).key() for r in result.trials
            if r.kind in ("baseline", "search") and r.rerun_of is None]
    assert len(keys) == len(set(keys)), keys
    # In particular nothing that failed deterministically (an OOM) came back, in any kind of trial.
    failed = {Candidate.from_dict(r.candidate).key() for r in result.trials if TrialStatus(r.status).deterministic}
    later = [r for r in result.trials if Candidate.from_dict(r.candidate).key() in failed and r.status == "ok"]
    assert not later


def test_stopping_and_rerunning_continues_the_same_study(paced_run, tmp_path):
    repo = copy_repo(paced_run[0], tmp_path / "paced")
    first = paced_run[1]
    before = _store(repo).trials()
    # Random proposals: the default sampler may rightly find nothing left worth a trial.
    again = run(repo, trials=3, sampler="random")
    assert again.status in ("ok", "no_promotion"), again.message
    assert again.study_name == first.study_name and again.run_id != first.run_id
    after = _store(repo).trials()
    assert [(s.number, s.kind) for s in after[: len(before)]] == [(s.number, s.kind) for s in before]
    new = after[len(before):]
    # The baseline is not rerun: the stored one is reused; three search trials (a disturbed one's
    # reruns are that trial again), then re-verification.
    rows = load_run(repo).trials[len(before):]
    assert budget_kinds([r for r in rows if r.kind != "verification"]) == ["search"] * 3
    assert again.baseline.to_dict() == next(s.result for s in before if s.kind == "baseline").to_dict()
    # The new proposals saw the first run's trials: none repeats a configuration already tried.
    tried = {s.result.candidate.key() for s in before if s.kind in ("baseline", "search")}
    fresh = [s.result.candidate.key() for s in new if s.kind == "search"]
    assert not tried & set(fresh) and len(set(fresh)) == 3
    # run.json now describes both runs' trials.
    assert [r.number for r in load_run(repo).trials] == [s.number for s in after]
    if again.promoted:
        assert paced_step_s(again.promoted.candidate.knobs) <= 1.15 * paced_step_s(BEST)


def _trial_states(repo: Path) -> list[optuna.trial.FrozenTrial]:
    contract = load_contract(repo)
    from infrarsi.experiment.store import study_name

    try:
        return optuna.load_study(study_name=study_name(contract), storage=default_storage_url(repo)).trials
    except KeyError:  # the study is not created yet
        return []


def _folders(path: Path) -> int:
    return sum(1 for p in path.iterdir() if p.is_dir()) if path.is_dir() else 0


def _cmdline(process: psutil.Process) -> str:
    try:
        return " ".join(process.cmdline())
    except psutil.Error:
        return ""


def test_ctrl_c_keeps_every_finished_trial_and_leaves_nothing_running(paced_prepared, tmp_path):
    repo = copy_repo(paced_prepared, tmp_path / "paced_sigint")
    # A terminal's Ctrl-C goes to the foreground process group: start infrarsi in its own group and
    # signal the group. (The trial runs in a session of its own; infrarsi must stop it.)
    proc = subprocess.Popen([str(INFRARSI), "run", str(repo), "--trials", "12"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, start_new_session=True, env=os.environ.copy())
    members: set[psutil.Process] = set()
    # Reading the study costs a good part of a core: polling it all the time disturbed the very trials
    # it watched. The cheap signs come first (a trial's log folder appears as it starts; a train.py
    # runs), and the study is read once per trial started after the third.
    logs = repo / ".infrarsi" / "trials"
    before, checked = _folders(logs), 0
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and proc.poll() is None:
            started = _folders(logs) - before
            children = psutil.Process(proc.pid).children(recursive=True)
            if started >= 4 and started > checked and any("train.py" in _cmdline(c) for c in children):
                checked = started
                trials = _trial_states(repo)
                finished = [t for t in trials if t.state.is_finished()]
                if len(finished) >= 3 and any(t.state == TrialState.RUNNING for t in trials):
                    members = {psutil.Process(proc.pid), *children}
                    break
            time.sleep(0.2)
        assert members, f"never caught a trial mid-run: {proc.poll()} {proc.stderr.read1() if proc.poll() is not None else ''}"
        finished_numbers = {t.number for t in _trial_states(repo) if t.state.is_finished()}
        os.killpg(proc.pid, signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == 130, (proc.returncode, out[-2000:], err[-2000:])
    assert b"Traceback" not in err, err[-3000:]

    # Nothing left behind: the trial's process tree is gone, and so is its isolated copy.
    time.sleep(0.5)
    alive = [p for p in members if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
    assert not alive, [(p.pid, p.cmdline()) for p in alive]
    assert not list(Path(tempfile.gettempdir()).glob(f"infrarsi-trial-*/{repo.name}"))

    # Every trial that had finished is in the study with its result; the interrupted one is failed,
    # its cost kept, and it is no verdict on its candidate.
    store = _store(repo)
    trials = store.study.get_trials(deepcopy=False)
    assert all(t.state.is_finished() for t in trials)
    with_result = {t.number for t in trials if RESULT_ATTR in t.user_attrs}
    assert finished_numbers <= with_result
    cut = [t for t in trials if INTERRUPTED_ATTR in t.user_attrs]
    assert len(cut) == 1 and cut[0].state == TrialState.FAIL and RESULT_ATTR not in cut[0].user_attrs
    assert store.interrupted_seconds() > 0
    saved = load_run(repo)
    assert saved.status == "interrupted" and "run again to continue" in saved.message
    assert saved.interrupted_s == pytest.approx(store.interrupted_seconds())
    assert [r.number for r in saved.trials] == sorted(with_result)
    assert {t.user_attrs[KIND_ATTR] for t in trials if t.number in with_result} <= {"baseline", "search"}


@pytest.mark.parametrize("sampler", [
    "random",
    pytest.param("greedy", marks=pytest.mark.e2e),
    pytest.param("batchfinder", marks=pytest.mark.e2e),
    pytest.param("tpe", marks=pytest.mark.e2e),
    pytest.param("gp", marks=pytest.mark.e2e),
])
def test_each_sampler_runs_in_the_same_harness(prepared, sampler):
    # The harness is the subject, not the verification: the best candidate alone, three rounds at most.
    save_contract(replace(load_contract(prepared), verify=VerifyPolicy(candidates=1, most_rounds=3)), prepared)
    result = run(prepared, trials=3, sampler=sampler, use_bank=False)
    assert result.status in ("ok", "no_promotion"), result.message
    assert result.sampler == sampler
    kinds = budget_kinds(result.trials)
    assert kinds.count("baseline") == 1 and kinds.count("search") == 2, kinds
    stored = _store(prepared).trials()
    assert [r.number for r in result.trials] == [s.number for s in stored]
    assert all(r.status in {s.value for s in TrialStatus} and r.wall_s > 0 for r in result.trials)
    # Whatever the sampler, a promotion means the reruns beat the baseline beyond the noise.
    if result.promoted:
        assert result.promoted.job_speedup[1] > result.noise_floor
    assert load_run(prepared).sampler == sampler


def test_an_unknown_sampler_is_an_error_that_runs_nothing(prepared):
    result = run(prepared, trials=2, sampler="annealing")
    assert result.status == "error" and "annealing" in result.message and "tpe" in result.message
    assert not (prepared / ".infrarsi" / "study.db").exists()


def test_a_run_without_verification_ends_after_the_search(prepared):
    result = run(prepared, trials=3, sampler="random", use_bank=False, verify=False)
    assert result.status == "searched" and "the budget of 3 trials" in result.message, result.message
    assert not result.verdicts and result.promoted is None
    assert [r.kind for r in result.trials].count("verification") == 0
