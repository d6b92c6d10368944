"""A script with no accumulation gets a split count the search tunes (issue 17): init adds the
gradient_accumulation patch's knob to the contract (1 = the script as written); a trial with any
other count applies the patch and sets it, and must keep the loss trajectory like any candidate.
Real init, doctor and trials on tests/test_data/stages/unsplit, whose forwards print their rows."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from infrarsi.contract import load_contract
from infrarsi.patches import find_sites
from infrarsi.project import editable_sources
from infrarsi.runner.command import patches_to_apply
from infrarsi.runner.trial import TrialSpec, run_trial
from infrarsi.search.space import SearchSpace
from infrarsi.stages.doctor import doctor
from infrarsi.stages.init import init
from infrarsi.trials import Candidate, TrialStatus
from tests.stages.conftest import git_repo

pytestmark = pytest.mark.e2e

UNSPLIT = Path(__file__).parents[1] / "test_data" / "stages" / "unsplit"


@pytest.fixture(scope="module")
def measured(tmp_path_factory):
    repo = tmp_path_factory.mktemp("split") / "unsplit"
    shutil.copytree(UNSPLIT, repo, ignore=shutil.ignore_patterns("__pycache__"))
    git_repo(repo)
    with pytest.MonkeyPatch.context() as mp:
        mp.delenv("ANTHROPIC_API_KEY", raising=False)
        done = init(repo, budget_bytes=2**30)
    assert done.ok, done.message
    assert doctor(repo, repeats=2).ok
    return repo, done


def rows_per_forward(log_path: str) -> set[int]:
    return {int(n) for n in re.findall(r"forward over (\d+) rows", Path(log_path).read_text())}


def test_init_adds_the_split_count_as_a_tunable_knob_and_the_patch_is_no_dimension_of_its_own(measured):
    repo, done = measured
    contract = load_contract(repo)
    assert contract.knob("batch_size").role == "workload" and not contract.knob("batch_size").tunable
    split = contract.knob("grad_accum_splits")
    assert (split.patch, split.default, split.domain, split.tunable, split.flag) == (
        "gradient_accumulation", 1, [1, 2, 4], True, "--grad_accum_splits")
    assert "gradient_accumulation" not in {name for name, _ in find_sites(editable_sources(repo, contract), contract)}
    space = SearchSpace.from_contract(contract, [])
    assert "grad_accum_splits=4" in space.setting_keys and not space.coupled


def test_a_split_count_applies_the_patch_and_holds_the_loss(measured, tmp_path):
    repo, _ = measured
    contract = load_contract(repo)
    split = Candidate(knobs={**contract.defaults(), "grad_accum_splits": 4})
    assert patches_to_apply(contract, split) == ("gradient_accumulation",)
    result = run_trial(TrialSpec(repo=repo, contract=contract, candidate=split, check_loss=True, log_dir=tmp_path / "split"))
    assert result.status is TrialStatus.OK, result.detail
    assert rows_per_forward(result.log_path) == {4}  # 16 rows a step, in 4 micro-batches
    assert any("chunk(args.grad_accum_splits)" in h.text for h in result.hunks)


def test_the_default_count_runs_the_script_as_written(measured, tmp_path):
    repo, _ = measured
    contract = load_contract(repo)
    result = run_trial(TrialSpec(repo=repo, contract=contract, candidate=Candidate(knobs=contract.defaults()),
                                 check_loss=True, log_dir=tmp_path / "as-written"))
    assert result.status is TrialStatus.OK, result.detail
    assert rows_per_forward(result.log_path) == {16} and result.hunks == []
