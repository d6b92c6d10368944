"""Nested configs (infrarsi/knobs/nested.py): a config node built in code, its leaves read as knobs
with roles, the owner's job length read from a nested flag on the command, and a trial that moves
a leaf through its flag (tests/test_data/stages/nested); a Hydra YAML config tuned through
``key.sub=value`` overrides (tests/test_data/stages/hydra)."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

from infrarsi.commandline import script_settings, without_flag
from infrarsi.contract import load_contract
from infrarsi.runner.command import build_argv, trial_knob_values
from infrarsi.runner.trial import TrialSpec, run_trial
from infrarsi.stages.doctor import doctor
from infrarsi.stages.init import init
from infrarsi.trials import Candidate, TrialStatus
from tests.stages.conftest import git_repo

NESTED = Path(__file__).parents[1] / "test_data" / "stages" / "nested"
HYDRA = Path(__file__).parents[1] / "test_data" / "stages" / "hydra"
COMMAND = [sys.executable, "train.py", "--trainer.max_iters=12", "--trainer.batch_size=8"]


def _initialised(tmp_path: Path):
    repo = Path(shutil.copytree(NESTED, tmp_path / "job"))
    git_repo(repo)
    result = init(repo, command=COMMAND, budget_bytes=2**30)
    assert result.ok, result.message
    return repo, result.contract


def test_the_nodes_leaves_are_knobs_with_roles_and_the_command_sets_the_job(tmp_path):
    _, contract = _initialised(tmp_path)
    knobs = {k.name: k for k in contract.knobs}
    assert contract.workload.knob_style == "nested"
    assert {n: (k.role, k.default, k.flag) for n, k in knobs.items() if "." in n} == {
        "system.seed": ("workload", 7, "--system.seed"),
        "model.width": ("workload", 64, "--model.width"),
        "trainer.num_workers": ("dataloader_workers", 2, "--trainer.num_workers"),
        "trainer.batch_size": ("workload", 8, "--trainer.batch_size"),
        "trainer.max_iters": ("steps", 12, "--trainer.max_iters"),
        "trainer.learning_rate": ("workload", 1e-3, "--trainer.learning_rate"),  # get_config's, set later
    }
    assert knobs["trainer.num_workers"].tunable and knobs["trainer.num_workers"].source == "trainer.py:13"
    assert contract.workload.planned_steps == 12 and contract.workload.global_batch == 8


def test_overrides_without_dashes_are_settings_and_are_replaced_where_they_stand():
    args = ["trainer.max_iters=30", "+data.workers=2", "plain", "--lr=0.1"]
    assert [(a.flag, a.value) for a in script_settings(args)] == [
        ("trainer.max_iters", "30"), ("+data.workers", "2"), ("", "plain"), ("--lr", "0.1")]
    assert without_flag(args, {"trainer.max_iters"}, True) == (["+data.workers=2", "plain", "--lr=0.1"], 0)


@pytest.mark.e2e
def test_a_trial_moves_a_leaf_through_its_flag(tmp_path):
    repo, contract = _initialised(tmp_path)
    assert doctor(repo, repeats=2).ok
    contract = load_contract(repo)
    result = run_trial(TrialSpec(repo=repo, contract=contract,
                                 candidate=Candidate(knobs={**contract.defaults(), "trainer.num_workers": 0})))
    assert result.status is TrialStatus.OK, result.detail
    log = Path(result.log_path).read_text()
    assert "workers 0" in log and "workers 2" not in log


def test_a_hydra_config_is_read_by_path_and_tuned_through_overrides(tmp_path):
    repo = Path(shutil.copytree(HYDRA, tmp_path / "hydra"))
    git_repo(repo)
    result = init(repo, command=[sys.executable, "train.py", "trainer.max_iters=30"], budget_bytes=2**30)
    assert result.ok, result.message
    contract = result.contract
    knobs = {k.name: k for k in contract.knobs}
    assert {n: (k.role, k.default, k.flag) for n, k in knobs.items() if "." in n or n == "seed"} == {
        "seed": ("workload", 3, "seed"),
        "model.width": ("workload", 64, "model.width"),
        "model.dropout": ("workload", 0.0, "model.dropout"),
        "trainer.batch_size": ("workload", 16, "trainer.batch_size"),
        "trainer.num_workers": ("dataloader_workers", 2, "trainer.num_workers"),
        "trainer.max_iters": ("steps", 30, "trainer.max_iters"),
        "trainer.lr": ("workload", 0.001, "trainer.lr"),
    }
    assert contract.workload.planned_steps == 30 and knobs["trainer.num_workers"].tunable
    argv = build_argv(contract, trial_knob_values(contract, {"trainer.num_workers": 0}, 5))
    assert argv[1:] == ["train.py", "trainer.max_iters=5", "trainer.num_workers=0"]  # replaced where it stood
