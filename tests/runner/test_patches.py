"""Patches are applied in the copy: their hunks are recorded, scope breaches are contract failures."""

import difflib

import pytest

from infrarsi.runner.trial import TrialSpec, run_trial
from infrarsi.trials import Candidate, TrialStatus

from .conftest import reader_lag, tree_digest

pytestmark = pytest.mark.e2e


def store_diff(repo, diff_id, rel, old, new):
    """An LLM patch as the patch library stores it: a unified diff under .infrarsi/patches/."""
    text = (repo / rel).read_text()
    assert old in text
    diff = "".join(difflib.unified_diff(text.splitlines(keepends=True), text.replace(old, new).splitlines(keepends=True),
                                        fromfile=f"a/{rel}", tofile=f"b/{rel}"))
    (repo / ".infrarsi" / "patches").mkdir(parents=True, exist_ok=True)
    (repo / ".infrarsi" / "patches" / f"{diff_id}.diff").write_text(diff)


def run(repo, contract, patches):
    before = tree_digest(repo)
    result = run_trial(TrialSpec(repo=repo, contract=contract, candidate=Candidate(patches=tuple(patches))))
    assert tree_digest(repo) == before
    return result


def test_a_patch_runs_in_the_copy_and_its_hunks_are_recorded(make_repo):
    repo, contract = make_repo("good.py")
    store_diff(repo, "slower", "train.py", "time.sleep(args.step_s)", "time.sleep(3 * args.step_s)")
    result = run(repo, contract, ["llm:slower"])
    assert result.status is TrialStatus.OK, result.detail
    # Arrival times jitter by the reader's wake-up; the steps' sum cannot read short of the sleeps.
    assert sum(result.step_times) >= len(result.step_times) * 0.06 - reader_lag(result, 1), result.step_times
    assert [h.path for h in result.hunks] == ["train.py"]
    assert "+        time.sleep(3 * args.step_s)" in result.hunks[0].text


def test_a_patch_touching_a_locked_file_breaks_the_contract(make_repo):
    repo, contract = make_repo("good.py")
    store_diff(repo, "sneaky", "helpers.py", "SCALE = 1.0", "SCALE = 0.5")
    result = run(repo, contract, ["llm:sneaky"])
    assert result.status is TrialStatus.CONTRACT
    assert "locked file helpers.py" in result.detail and result.losses == []


def test_an_unknown_patch_is_a_crash_with_the_reason(make_repo):
    repo, contract = make_repo("good.py")
    result = run(repo, contract, ["no_such_patch"])
    assert result.status is TrialStatus.CRASH
    assert "unknown patch 'no_such_patch'" in result.detail
