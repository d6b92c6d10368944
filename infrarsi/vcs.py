"""Git, through GitPython: where a training repo sits in git, what is dirty, and commits on new branches.

A commit is built in a temporary worktree checked out at the base commit, so the user's own
working tree and checked-out branch are never touched; the result is a branch to review.
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import git

FALLBACK_AUTHOR = git.Actor("InfraRSI", "infrarsi@localhost")


@dataclass(frozen=True, slots=True)
class GitPlace:
    """A training repo inside a git repository (possibly a sub-folder of it)."""

    repo: git.Repo
    root: Path
    prefix: str
    """The training repo's folder relative to the git root ('' at the root)."""

    def git_path(self, rel: str) -> str:
        return f"{self.prefix}/{rel}" if self.prefix else rel


def locate(path: Path) -> GitPlace | None:
    """The git repository holding ``path``, or None when there is none."""
    path = Path(path).resolve()
    try:
        repo = git.Repo(path, search_parent_directories=True)
    except (git.InvalidGitRepositoryError, git.NoSuchPathError):
        return None
    root = Path(repo.working_tree_dir).resolve()
    prefix = path.relative_to(root).as_posix()
    return GitPlace(repo, root, "" if prefix == "." else prefix)


def head_commit(path: Path) -> str:
    """HEAD's sha for the repo holding ``path``; '' without git or without commits."""
    place = locate(path)
    if place is None:
        return ""
    try:
        return place.repo.head.commit.hexsha
    except ValueError:
        return ""


def dirty(place: GitPlace, rel_paths: list[str]) -> list[str]:
    """Which of these paths have uncommitted changes: staged, unstaged, or untracked."""
    wanted = {place.git_path(p): p for p in rel_paths}
    changed = {d.a_path for d in place.repo.index.diff(None)}
    try:
        changed |= {d.a_path for d in place.repo.index.diff("HEAD")}
    except git.BadName:  # no commit yet: everything is uncommitted
        changed |= set(wanted)
    changed |= set(place.repo.untracked_files)
    return sorted(wanted[p] for p in wanted if p in changed)


def author(repo: git.Repo) -> git.Actor:
    reader = repo.config_reader()
    name = reader.get_value("user", "name", default="")
    email = reader.get_value("user", "email", default="")
    return git.Actor(name, email) if name and email else FALLBACK_AUTHOR


@contextlib.contextmanager
def worktree(place: GitPlace, base: str) -> Iterator[Path]:
    """A temporary detached checkout of ``base``; yields the training repo's folder in it."""
    tmp = Path(tempfile.mkdtemp(prefix="infrarsi-worktree-"))
    target = tmp / "wt"
    place.repo.git.worktree("add", "--quiet", "--detach", str(target), base)
    try:
        yield target / place.prefix if place.prefix else target
    finally:
        place.repo.git.worktree("remove", "--force", str(target))
        shutil.rmtree(tmp, ignore_errors=True)


def branch_exists(place: GitPlace, branch: str) -> bool:
    return branch in [h.name for h in place.repo.heads]


def commit_on_branch(checkout: Path, place: GitPlace, rel_paths: list[str], message: str, branch: str) -> str:
    """Commit exactly these paths in the worktree holding ``checkout``, then point a new ``branch`` at it.

    The branch appears only once the commit exists, so a failed apply leaves no branch behind."""
    wt = git.Repo(checkout, search_parent_directories=True)
    wt.index.add([place.git_path(p) for p in rel_paths])
    who = author(place.repo)
    sha = wt.index.commit(message, author=who, committer=who).hexsha
    place.repo.create_head(branch, sha)
    return sha
