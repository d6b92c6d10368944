"""Git, through GitPython: where a training repo sits in git, what is dirty, and commits on new branches.

A commit is built in a temporary worktree checked out at the base commit, so the user's own
working tree and checked-out branch are never touched; the result is a branch to review.
"""

from __future__ import annotations

import contextlib
import os
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
    if repo.working_tree_dir is None:  # a bare repository checks nothing out, so it holds no path
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
    return git.Actor(str(name), str(email)) if name and email else FALLBACK_AUTHOR


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


COMMIT_HOOKS = ("pre-commit", "prepare-commit-msg", "commit-msg")


class HookRefused(Exception):
    """The repository's own commit hooks refused the commit; ``hooks`` names those present."""

    def __init__(self, hooks: list[str], output: str):
        self.hooks = hooks
        self.output = output
        super().__init__(f"the repository's {' / '.join(hooks)} hook refused the commit: {output}")


def commit_hooks(repo: git.Repo) -> list[str]:
    """The commit hooks git will run for ``repo`` (its hooks folder or ``core.hooksPath``)."""
    folder = Path(repo.git.rev_parse("--git-path", "hooks"))
    if not folder.is_absolute():
        folder = Path(repo.working_dir) / folder  # where git ran, so where its relative answer starts
    return [name for name in COMMIT_HOOKS if (folder / name).is_file() and os.access(folder / name, os.X_OK)]


def valid_branch(place: GitPlace, branch: str) -> bool:
    """Whether git accepts ``branch`` as a branch name."""
    try:
        place.repo.git.check_ref_format("--branch", branch)
    except git.GitCommandError:
        return False
    return True


def add_note(place: GitPlace, sha: str, text: str, ref: str) -> None:
    """Attach ``text`` to commit ``sha`` as a git note under ``ref`` (replacing one already there)."""
    who = author(place.repo)  # a note is a commit on the notes ref: it needs an identity too
    env = {"GIT_AUTHOR_NAME": who.name, "GIT_AUTHOR_EMAIL": who.email,
           "GIT_COMMITTER_NAME": who.name, "GIT_COMMITTER_EMAIL": who.email}
    place.repo.git.notes("--ref", ref, "add", "--force", "--message", text, sha, env=env)


def read_note(place: GitPlace, sha: str, ref: str) -> str | None:
    try:
        return place.repo.git.notes("--ref", ref, "show", sha)
    except git.GitCommandError:  # no note on this commit
        return None


def commit_on_branch(checkout: Path, place: GitPlace, rel_paths: list[str], message: str, branch: str) -> str:
    """Commit exactly these paths in the worktree holding ``checkout``, then point a new ``branch`` at it.

    The commit is made by ``git commit`` itself, so the repository's pre-commit and commit-msg hooks
    run as they would for its owner (GitPython's own commit looks for hooks in the worktree's private
    folder and finds none); a hook that says no raises :class:`HookRefused`. The branch appears only
    once the commit exists, so a failed apply leaves no branch behind."""
    wt = git.Repo(checkout, search_parent_directories=True)
    wt.index.add([place.git_path(p) for p in rel_paths])
    who = author(place.repo)
    env = {"GIT_AUTHOR_NAME": who.name, "GIT_AUTHOR_EMAIL": who.email,
           "GIT_COMMITTER_NAME": who.name, "GIT_COMMITTER_EMAIL": who.email}
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as file:
        file.write(message)
    try:
        wt.git.commit("--quiet", "--cleanup=verbatim", "--file", file.name, env=env)
    except git.GitCommandError as err:
        hooks = commit_hooks(wt)
        if hooks:
            raise HookRefused(hooks, (str(err.stderr or "") + str(err.stdout or "")).strip()) from None
        raise
    finally:
        os.unlink(file.name)
    sha = wt.head.commit.hexsha
    place.repo.create_head(branch, sha)
    return sha
