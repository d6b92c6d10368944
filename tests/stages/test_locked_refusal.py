"""A locked file (outside the editable scope, hashed by init) edited after init: every stage refuses,
names the file, and does nothing — no trial, no report, no branch (cf. tests/stages/test_init.py)."""

from __future__ import annotations

from pathlib import Path

import git
import pytest

from infrarsi.cli import main
from infrarsi.contract import ContractError
from infrarsi.stages.apply import apply
from infrarsi.stages.doctor import doctor
from infrarsi.stages.optimize import optimize
from infrarsi.stages.report import report
from infrarsi.stages.run import run
from infrarsi.stages.verify import verify
from tests.stages.conftest import git_state, tree_digest

LOCKED = "data.py"
NAMED = r"locked file data\.py is changed since init"


@pytest.fixture
def tampered(ran: Path) -> Path:
    """The repo after a finished run, then an edit of the locked data.py (the stages all have what
    they need to run, but for this)."""
    with (ran / LOCKED).open("a") as f:
        f.write("\n\ndef loss_at(step: int) -> float:  # a \"faster\" loss\n    return 0.0\n")
    return ran


def _untouched(repo: Path):
    before_tree, before_git = tree_digest(repo), git_state(repo)
    return lambda: tree_digest(repo) == before_tree and git_state(repo) == before_git


STAGES = {
    "doctor": lambda repo: doctor(repo, repeats=2),
    "run": lambda repo: run(repo, trials=2),
    "report": lambda repo: report(repo),
    "apply": lambda repo: apply(repo),
    "verify": lambda repo: verify(repo, "HEAD", rounds=2),
    "optimize": lambda repo: optimize(repo, "faster, at most 2 trials", do_apply=True),
}


@pytest.mark.parametrize("stage", sorted(STAGES))
def test_each_stage_refuses_a_changed_locked_file(tampered, stage):
    untouched = _untouched(tampered)
    try:
        result = STAGES[stage](tampered)
    except ContractError as err:
        message = str(err)
    else:  # a stage that reports instead of raising must still refuse
        assert result.status in ("refused", "error"), (stage, result.status)
        message = result.message
    assert LOCKED in message and "changed since init" in message, message
    assert untouched(), f"{stage} wrote something after refusing"


@pytest.mark.parametrize("argv", [
    ["doctor", "{repo}", "--repeats", "2"],
    ["run", "{repo}", "--trials", "2"],
    ["report", "{repo}"],
    ["apply", "{repo}"],
    ["apply", "{repo}", "--dry-run"],
    ["verify", "{repo}", "HEAD"],
    ["optimize", "{repo}", "faster", "--apply"],
])
def test_each_command_exits_non_zero_naming_the_file(tampered, argv, capsys):
    untouched = _untouched(tampered)
    code = main([a.format(repo=tampered) for a in argv])
    captured = capsys.readouterr()
    assert code != 0
    assert LOCKED in captured.err and "git checkout -- data.py" in captured.err, captured
    assert untouched()


def test_restoring_the_file_lifts_the_refusal(tampered):
    git.Repo(tampered).git.checkout("--", LOCKED)
    assert report(tampered, formats=()).status == "ok"
