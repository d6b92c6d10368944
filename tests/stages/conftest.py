"""The paced workload, prepared once per session: a git repo, `init` with a 128 MiB budget and
`doctor`, then (for the tests that need one) a finished 12-trial `run`. Each test works on its own
copy, so the expensive steps are paid once and no test sees another's branches or trials.

Helpers are imported by the tests as ``from tests.stages.conftest import …``.
"""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import git
import pytest

from infrarsi.records import RunResult
from infrarsi.stages.doctor import doctor
from infrarsi.stages.init import init
from infrarsi.stages.run import run

PACED = Path(__file__).parents[1] / "test_data" / "stages" / "paced"
BUDGET_BYTES = 128 * 2**20
USER = git.Actor("Ada Engineer", "ada@example.com")
BEST = {"micro_batch_size": 16, "threads": 2, "activation_checkpointing": True, "optimizer_impl": "foreach"}
"""The fastest setting that fits the budget, by construction of train.py."""
RUN_TRIALS = 12


def paced_step_s(knobs: dict) -> float:
    """train.py's step time for these settings (its own formula, with its defaults)."""
    mb = knobs.get("micro_batch_size", 2)
    step = 0.010 + 0.012 * (16 // mb)
    step *= 1.0 if knobs.get("threads", 1) >= 2 else 1.3
    step *= 1.15 if knobs.get("activation_checkpointing", False) else 1.0
    step *= 0.9 if knobs.get("optimizer_impl", "for-loop") == "foreach" else 1.0
    return step


def paced_fits(knobs: dict) -> bool:
    """Whether train.py's held activations (12 MiB per sequence, halved by checkpointing) fit 128 MiB
    with the interpreter's own ~15 MiB: only micro_batch_size=16 without checkpointing does not."""
    return not (knobs.get("micro_batch_size", 2) == 16 and not knobs.get("activation_checkpointing", False))


def budget_kinds(rows: list) -> list[str]:
    """The kind of each trial the budget counted: a disturbed trial's reruns are that trial again
    (experiment/quiet.py), so they are left out."""
    return [r.kind for r in rows if r.rerun_of is None]


def git_repo(path: Path) -> git.Repo:
    """``path`` as the user's repository: every file committed on one base commit."""
    repo = git.Repo.init(path)
    files = [p.relative_to(path).as_posix() for p in path.rglob("*")
             if p.is_file() and ".git" not in p.relative_to(path).parts]
    repo.index.add(files)
    repo.index.commit("the user's training job", author=USER, committer=USER)
    return repo


def fresh_paced(dest: Path) -> Path:
    """A copy of the paced workload committed in a new git repo, no InfraRSI state."""
    shutil.copytree(PACED, dest, ignore=shutil.ignore_patterns("__pycache__", ".infrarsi"))
    git_repo(dest)
    return dest


def measured_copy(src: Path, dest: Path, budget_bytes: int = BUDGET_BYTES) -> Path:
    """A copy of a test job in a new git repo after `init --budget-gib 0.125` (or `budget_bytes`; no
    model) and `doctor --repeats 2`."""
    shutil.copytree(src, dest, ignore=shutil.ignore_patterns("__pycache__", ".infrarsi"))
    git_repo(dest)
    with pytest.MonkeyPatch.context() as mp:
        mp.delenv("ANTHROPIC_API_KEY", raising=False)
        done = init(dest, budget_bytes=budget_bytes)
        assert done.ok, done.message
        assert doctor(dest, repeats=2).ok
    return dest


def copy_repo(src: Path, dest: Path) -> Path:
    """A byte copy of a prepared repo, .git and .infrarsi included (git repos are relocatable)."""
    shutil.copytree(src, dest, symlinks=True)
    return dest


def tree_digest(repo: Path) -> dict[str, str]:
    """Every file of the working tree (the .git directory aside) by content hash."""
    return {p.relative_to(repo).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(repo.rglob("*")) if p.is_file() and ".git" not in p.relative_to(repo).parts}


def git_state(repo: Path) -> dict[str, object]:
    """What a user would notice in git: HEAD, the checked-out branch, every ref, the status, worktrees."""
    g = git.Repo(repo)
    return {
        "head": g.head.commit.hexsha,
        "branch": g.active_branch.name,
        "refs": g.git.for_each_ref("--format=%(refname) %(objectname)"),
        # InfraRSI's own state (.infrarsi/: logs, the study) aside: it is not the user's work.
        "status": [line for line in g.git.status("--porcelain", "--untracked-files=all").splitlines()
                   if not line[3:].startswith(".infrarsi/")],
        "worktrees": g.git.worktree("list", "--porcelain"),
    }


@pytest.fixture(scope="session")
def paced_prepared(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The paced workload after `init --budget-gib 0.125` and `doctor --repeats 2` (read-only: copy it)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.delenv("ANTHROPIC_API_KEY", raising=False)
        mp.setenv("INFRARSI_BANK_URL", f"sqlite:///{tmp_path_factory.mktemp('bank')}/bank.db")
        repo = fresh_paced(tmp_path_factory.mktemp("prepared") / "paced")
        done = init(repo, budget_bytes=BUDGET_BYTES)
        assert done.ok, done.message
        assert done.locked == ["data.py"] and done.contract.scope.editable == ["train.py"]
        assert doctor(repo, repeats=2).ok
    return repo


@pytest.fixture(scope="session")
def paced_run(paced_prepared: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, RunResult]:
    """The prepared repo after `run --trials 12` with the default sampler (read-only: copy it)."""
    repo = copy_repo(paced_prepared, tmp_path_factory.mktemp("ran") / "paced")
    with pytest.MonkeyPatch.context() as mp:
        mp.delenv("ANTHROPIC_API_KEY", raising=False)
        mp.setenv("INFRARSI_BANK_URL", f"sqlite:///{tmp_path_factory.mktemp('bank')}/bank.db")
        result = run(repo, trials=RUN_TRIALS)
    return repo, result


@pytest.fixture
def prepared(paced_prepared: Path, tmp_path: Path) -> Path:
    """This test's own copy of the prepared repo."""
    return copy_repo(paced_prepared, tmp_path / "paced")


@pytest.fixture
def ran(paced_run: tuple[Path, RunResult], tmp_path: Path) -> Path:
    """This test's own copy of the repo after the 12-trial run."""
    return copy_repo(paced_run[0], tmp_path / "paced")
