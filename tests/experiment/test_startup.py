"""A patch whose one-off start-up outlasts the whole job is never tried (issue 30: compile trials
that could not pay back were most of a run's waste), and the search records why."""

from __future__ import annotations

import shutil
from dataclasses import replace
from pathlib import Path

from infrarsi.contract import save_contract
from infrarsi.experiment.search_loop import validate_patches
from infrarsi.experiment.session import TrialSession
from infrarsi.experiment.startup import cannot_pay_back, patch_startup_s
from infrarsi.experiment.store import TrialStore
from infrarsi.trials import Candidate, TrialResult, TrialStatus
from tests.stages.test_doctor import FIXTURE, dense_gpt_contract


def contract_planning(tmp_path: Path, steps: int):
    repo = tmp_path / "dense_gpt"
    shutil.copytree(FIXTURE, repo, ignore=shutil.ignore_patterns("__pycache__", ".infrarsi"))
    contract = dense_gpt_contract(repo)
    contract = replace(contract, workload=replace(contract.workload, planned_steps=steps))
    save_contract(contract, repo)
    return repo, contract


def test_compilation_is_weighed_against_the_whole_job_at_its_planned_length(tmp_path):
    _, contract = contract_planning(tmp_path, 100)
    startup = patch_startup_s(contract, "compile_model")
    assert startup > 0 and patch_startup_s(contract, "optimizer_fused") == 0.0
    # 100 steps of 20 ms (a 2 s job) cannot repay tens of seconds of compiling; 100 steps of 10 s can.
    why = cannot_pay_back(contract, "compile_model", 0.020)
    assert why and "cannot pay back" in why and "100 planned steps of 20 ms" in why
    assert cannot_pay_back(contract, "compile_model", 10.0) is None
    assert cannot_pay_back(contract, "optimizer_fused", 0.020) is None  # no one-off cost to repay
    assert cannot_pay_back(contract, "compile_model", None) is None  # no measured step: try it


def test_the_search_skips_its_trial_and_says_why(tmp_path):
    repo, contract = contract_planning(tmp_path, 100)
    store = TrialStore.open(contract, ["compile_model"], storage_url=f"sqlite:///{tmp_path / 'study.db'}")
    session = TrialSession(repo, contract, store)
    base = TrialResult(status=TrialStatus.OK, candidate=Candidate(), step_times=[0.02] * 4)
    (check,) = validate_patches(session, base, ["compile_model"])
    assert (check.name, check.status, check.cost_s) == ("compile_model", "skipped", 0.0)
    assert "cannot pay back" in check.reason
    assert store.trials(("validation",)) == []  # no trial ran
