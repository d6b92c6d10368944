"""A torchrun group: per-rank launcher records, the slowest rank's time, memory per rank, every worker killed."""

import re

import pytest

from infrarsi.runner.trial import TrialSpec, run_trial
from infrarsi.trials import Candidate, TrialStatus

from .conftest import tree_digest, trial_processes

pytestmark = pytest.mark.e2e
MB = 2**20


def two_ranks(make_repo, **contract_args):
    """tests/test_data/runner/ranks.py launched by torchrun as two processes."""
    repo, contract = make_repo("ranks.py", **contract_args)
    contract.workload.launcher = "torchrun"
    contract.workload.command = ["torchrun", "--nproc_per_node=2", "train.py"]
    return repo, contract


def run_group(repo, contract, knobs, **spec_args):
    return run_trial(TrialSpec(repo=repo, contract=contract, candidate=Candidate(knobs=knobs), timeout_s=120,
                               **spec_args))


def assert_no_worker_survived(result):
    log = open(result.log_path).read()
    assert len(re.findall(r"rank \d pid \d+ token \w+", log)) == 2
    assert not trial_processes(log), "a torchrun worker survived"


def test_group_is_measured_at_its_slowest_rank_and_killed_whole(make_repo):
    repo, contract = two_ranks(make_repo)
    before = tree_digest(repo)
    # Rank 0 goes NaN at step 3 and then every rank hangs: only the runner's kill ends the group.
    result = run_group(repo, contract, {"nan_at": 3}, check_loss=False)
    assert tree_digest(repo) == before
    assert result.status is TrialStatus.NUMERICS, result.detail
    assert "loss is nan at step 3" in result.detail
    # Rank 1 sleeps 4 x 20 ms a step, rank 0 20 ms: the group runs at rank 1's pace.
    # (Step 0 has no start to time from: the probe is first called at its end.)
    assert all(t >= 0.08 for t in result.warmup_times[1:] + result.step_times[:1]), result.warmup_times
    assert result.tokens_per_step == 32
    assert_no_worker_survived(result)


def test_each_rank_is_held_to_the_budget_not_their_sum(make_repo, torch_rss):
    budget = torch_rss + 300 * MB
    repo, contract = two_ranks(make_repo, budget_bytes=budget)
    # Rank 0 holds 100 MB, rank 1 200 MB (above what torch holds): each under the budget, together above.
    result = run_group(repo, contract, {"alloc_mb": 100}, steps=6)
    assert result.status is TrialStatus.OK, result.detail
    first, second = result.rank_peak_bytes
    assert 100 * MB < first < second < budget
    assert 80 * MB < second - first < 120 * MB
    assert result.peak_bytes == second and first + second > budget
    # Each rank's optimizer steps, seen by the launcher: tokens and samples summed over the ranks.
    assert result.source == "launcher" and len(result.losses) == 6
    assert result.tokens_per_step == 32 and result.samples_per_step == 4


def test_a_rank_above_the_budget_is_named_and_the_group_killed(make_repo, torch_rss):
    budget = torch_rss + 300 * MB
    repo, contract = two_ranks(make_repo, budget_bytes=budget)
    # Rank 1 holds 320 MB and sleeps 80 ms a step: the watchdog sees it long before 1000 steps.
    result = run_group(repo, contract, {"alloc_mb": 160}, steps=1000)
    assert result.status is TrialStatus.OOM, result.detail
    assert "rank 1's RSS reached" in result.detail
    assert f"above the budget of {budget / 2**30:.2f} GiB" in result.detail
    assert len(result.losses) < 1000
    assert_no_worker_survived(result)
