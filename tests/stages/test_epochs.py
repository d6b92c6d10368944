"""A job whose length is counted in epochs: init says so, the launcher counts the steps an epoch
(the training loader's length over the batches a step draws) and doctor plans with them, so the real job's length, which
start-up costs are amortized over and compilation is judged on, is epochs x steps an epoch."""

from __future__ import annotations

import shutil
from dataclasses import replace
from pathlib import Path

from infrarsi.contract import load_contract
from infrarsi.runner.trial import TrialSpec, run_trial
from infrarsi.stages.doctor_contract import with_measured_length
from infrarsi.stages.init import init
from infrarsi.trials import Candidate
from tests.stages.conftest import git_repo

EPOCHS = Path(__file__).parents[1] / "test_data" / "stages" / "epochs"


def test_an_epoch_counted_job_is_planned_as_epochs_times_the_steps_an_epoch(tmp_path):
    repo = tmp_path / "epochs"
    shutil.copytree(EPOCHS, repo)
    git_repo(repo)
    done = init(repo, budget_bytes=2**30, command=["python", "train.py", "--epochs", "3"])
    assert done.status == "ok", done.message
    w = load_contract(repo).workload
    assert (w.epochs, w.planned_from) == (3, "3 epochs (--epochs)")
    assert w.planned_steps == w.total_steps  # a trial's length until doctor has counted

    contract = load_contract(repo)
    baseline = run_trial(TrialSpec(repo=repo, contract=contract, candidate=Candidate(), check_loss=False))
    assert baseline.ok, baseline.detail
    # 96 rows in batches of 8 = 12 batches, 2 drawn per optimizer step: 6 steps an epoch.
    assert baseline.steps_per_epoch == 6
    w = with_measured_length(contract, [baseline, baseline]).workload
    assert w.planned_steps == 18
    assert w.planned_from.startswith("3 epochs (--epochs) x 6 steps an epoch"), w.planned_from
    assert w.epochs == 0
    assert with_measured_length(contract, [baseline, replace(baseline, steps_per_epoch=None)]) is contract


def test_a_step_count_wins_and_says_where_it_came_from(tmp_path):
    repo = tmp_path / "steps"
    shutil.copytree(EPOCHS, repo)
    text = (repo / "train.py").read_text()
    (repo / "train.py").write_text(text.replace(
        '    args = parser.parse_args()',
        '    parser.add_argument("--max_iters", type=int, default=40, help="optimizer steps")\n'
        '    args = parser.parse_args()'))
    git_repo(repo)
    assert init(repo, budget_bytes=2**30).status == "ok"
    w = load_contract(repo).workload
    assert (w.planned_steps, w.planned_from, w.epochs) == (40, "--max_iters = 40", 0)
