"""`.infrarsi/` keeps its machine-local files out of the user's `git status`; what a team commits shows."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from infrarsi.contract import require_intact
from infrarsi.runner.trial import TrialSpec, run_trial
from infrarsi.trials import Candidate, TrialStatus

pytestmark = pytest.mark.e2e


def _status(repo: Path) -> list[str]:
    out = subprocess.run(["git", "status", "--porcelain", "--untracked-files=all"], cwd=repo,
                         check=True, capture_output=True, text=True).stdout
    return sorted(line[3:] for line in out.splitlines())


def test_after_init_doctor_and_a_trial_git_shows_only_what_a_team_commits(prepared: Path):
    result = run_trial(TrialSpec(repo=prepared, contract=require_intact(prepared), candidate=Candidate()))
    assert result.status is TrialStatus.OK, result.detail
    assert list((prepared / ".infrarsi" / "trials").iterdir()), "the trial left its logs under .infrarsi/"
    assert _status(prepared) == [".infrarsi/.gitignore", ".infrarsi/contract.toml", ".infrarsi/doctor.json"]


def test_a_state_dir_from_before_gets_its_gitignore_from_the_next_stage(prepared: Path):
    (prepared / ".infrarsi" / ".gitignore").unlink()
    require_intact(prepared)
    assert ".infrarsi/doctor.json" in _status(prepared)
    assert not [p for p in _status(prepared) if "/trials/" in p or p.endswith("study.db")]
