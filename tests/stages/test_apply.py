"""apply on the paced run: a commit on a new branch in real git, the user's checkout untouched."""

from __future__ import annotations

import ast
import json
import shutil
import stat
from pathlib import Path

import git
import pytest

from infrarsi import vcs
from infrarsi.cli import main
from infrarsi.contract import load_contract
from infrarsi.records import load_run, save_run
from infrarsi.stages.apply import apply
from infrarsi.stages.verify import recorded_speedup
from tests.stages.conftest import BEST, git_state, tree_digest


def _branches(repo: Path) -> list[str]:
    return sorted(h.name for h in git.Repo(repo).heads)


def _defaults_in(source: str) -> dict[str, object]:
    """Each argparse option's default as a committed train.py defines it (store_true: False unless set)."""
    out: dict[str, object] = {}
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "add_argument":
            name = ast.literal_eval(node.args[0]).lstrip("-")
            kw = {k.arg: k.value for k in node.keywords}
            store_true = "action" in kw and ast.literal_eval(kw["action"]) == "store_true"
            out[name] = ast.literal_eval(kw["default"]) if "default" in kw else (False if store_true else None)
    return out


def _no_worktrees_left(repo: Path) -> None:
    """apply builds its commit in a temporary worktree: it must be gone, and git must not know it."""
    assert len(git.Repo(repo).git.worktree("list", "--porcelain").split("\n\n")) == 1
    assert not list((repo / ".git" / "worktrees").glob("*"))


def test_apply_commits_the_promoted_candidate_on_a_branch_and_touches_nothing_else(ran):
    contract, run = load_contract(ran), load_run(ran)
    (ran / "notes.txt").write_text("the user's own untracked notes\n")  # outside the scope: no refusal
    before_tree, before_git = tree_digest(ran), git_state(ran)

    result = apply(ran)

    assert result.status == "committed", result.message
    assert tree_digest(ran) == before_tree and git_state(ran) | {"refs": ""} == before_git | {"refs": ""}
    _no_worktrees_left(ran)
    g = git.Repo(ran)
    assert result.branch == f"infrarsi/{run.run_id}" and _branches(ran) == sorted([before_git["branch"], result.branch])
    commit = g.commit(result.branch)
    assert commit.hexsha == result.commit and [p.hexsha for p in commit.parents] == [contract.base_commit]
    # Only in-scope files change, and exactly the promoted settings are written as defaults.
    changed = sorted(commit.stats.files)
    assert changed == result.paths == ["train.py"] and all(contract.scope.allows(p) for p in changed)
    defaults = _defaults_in(commit.tree["train.py"].data_stream.read().decode())
    chosen = run.promoted.candidate.knobs  # the known best, or a runner-up its reruns could not separate
    assert {k: defaults[k] for k in chosen} == chosen and chosen["micro_batch_size"] == 16
    assert _defaults_in((ran / "train.py").read_text()) == defaults | {  # the base: the workload is kept
        "micro_batch_size": 2, "threads": 1, "activation_checkpointing": False, "optimizer_impl": "for-loop"}
    assert "data.py" not in commit.stats.files and "notes.txt" not in commit.tree
    assert result.flags == []
    # The evidence is in the message for people and beside the commit as data, which verify reads.
    message = commit.message
    assert message == result.commit_message
    point, low, high = run.promoted.job_speedup
    assert f"{point:.2f}x faster training job (95% CI {low:.2f}-{high:.2f}x)" in message
    assert recorded_speedup(vcs.locate(ran), commit.hexsha) == run.promoted.job_speedup
    # Every way a trial ended is counted (the failed ones too: the search may or may not have
    # spent one on micro-batch 16 without checkpointing, which does not fit).
    ended = sorted({t.status for t in run.trials})
    assert "ok" in ended
    for words in (f"Run {run.run_id}", "promotion floor", "95% CI", "interleaved rounds of whole processes",
                  "per step by the job's own step records", "peak memory", f"trials: {len(run.trials)}", *ended,
                  "Audited paths", "  train.py"):
        assert words in message, (words, message)
    for name, value in chosen.items():
        assert f"{name}={value}" in message or value == _defaults_in((ran / "train.py").read_text())[name]
    # The branch exists already: a second apply refuses and creates nothing.
    again = apply(ran)
    assert again.status == "refused" and "already exists" in again.message
    assert _branches(ran) == sorted([before_git["branch"], result.branch])


def test_apply_refuses_uncommitted_changes_in_the_editable_scope(ran):
    train = ran / "train.py"
    train.write_text(train.read_text() + "\n# work in progress\n")
    before_tree, before_git = tree_digest(ran), git_state(ran)
    result = apply(ran)
    assert result.status == "refused" and "train.py" in result.message and "uncommitted" in result.message
    assert tree_digest(ran) == before_tree and git_state(ran) == before_git
    # Staged but not committed is refused too.
    git.Repo(ran).index.add(["train.py"])
    staged = apply(ran)
    assert staged.status == "refused" and "train.py" in staged.message
    assert len(_branches(ran)) == 1


def test_apply_without_git_is_a_clear_error_and_creates_no_repository(ran):
    shutil.rmtree(ran / ".git")
    before = tree_digest(ran)
    result = apply(ran)
    assert result.status == "error" and "not in a git repository" in result.message
    assert "git init" in result.message and not result.branch
    assert not (ran / ".git").exists() and tree_digest(ran) == before


def test_dry_run_shows_the_change_and_writes_nothing(ran, capsys):
    before_tree, before_git = tree_digest(ran), git_state(ran)
    result = apply(ran, dry_run=True)
    assert result.status == "dry_run" and not result.commit and not result.branch
    assert result.paths == ["train.py"] and "+    parser.add_argument(\"--micro_batch_size\", type=int, default=16" in result.diff
    assert result.commit_message.startswith("infrarsi: ")
    assert tree_digest(ran) == before_tree and git_state(ran) == before_git
    _no_worktrees_left(ran)
    # The command line says the same and exits 0.
    assert main(["apply", str(ran), "--dry-run", "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["status"] == "dry_run" and shown["diff"] == result.diff
    assert tree_digest(ran) == before_tree and git_state(ran) == before_git


def test_a_pre_commit_hook_that_rejects_leaves_no_branch_behind(ran):
    hooks = ran.parent / "hooks"
    hooks.mkdir()
    hook = hooks / "pre-commit"
    hook.write_text("#!/bin/sh\necho 'no commits on Fridays' >&2\nexit 1\n")
    hook.chmod(hook.stat().st_mode | stat.S_IXUSR)
    with git.Repo(ran).config_writer() as config:
        config.set_value("core", "hooksPath", str(hooks))
    before_tree, before_git = tree_digest(ran), git_state(ran)
    result = apply(ran)
    assert result.status == "error" and "hook" in result.message, result.message
    assert tree_digest(ran) == before_tree and git_state(ran) == before_git
    _no_worktrees_left(ran)


def test_a_patch_that_no_longer_applies_leaves_no_branch_behind(ran):
    run = load_run(ran)
    run.promoted.candidate = type(run.promoted.candidate)(knobs=dict(BEST), patches=("no_such_patch",))
    save_run(run, ran)
    before_tree, before_git = tree_digest(ran), git_state(ran)
    result = apply(ran)
    assert result.status == "error" and "no_such_patch" in result.message
    assert tree_digest(ran) == before_tree and git_state(ran) == before_git
    _no_worktrees_left(ran)


def test_apply_before_a_run_says_what_to_do(prepared):
    result = apply(prepared)
    assert result.status == "error" and "infrarsi run" in result.message
    assert len(_branches(prepared)) == 1


@pytest.mark.parametrize("trial", [0, 9999])
def test_a_candidate_that_was_not_promoted_is_not_applied(ran, trial):
    result = apply(ran, candidate=trial)  # trial 0 is the baseline
    assert result.status == "error" and "not a promoted candidate" in result.message
    assert len(_branches(ran)) == 1


def _hook(repo: Path, name: str, body: str) -> None:
    """A hook where git keeps them by default: the repository's own .git/hooks."""
    hook = repo / ".git" / "hooks" / name
    hook.parent.mkdir(parents=True, exist_ok=True)
    hook.write_text("#!/bin/sh\n" + body)
    hook.chmod(hook.stat().st_mode | stat.S_IXUSR)


def test_the_repositorys_own_pre_commit_hook_runs_and_its_refusal_is_said(ran):
    _hook(ran, "pre-commit", "echo 'lint failed: train.py' >&2\nexit 1\n")
    before_tree, before_git = tree_digest(ran), git_state(ran)
    result = apply(ran)
    assert result.status == "error", result.message
    assert "pre-commit" in result.message and "refused" in result.message and "lint failed" in result.message
    assert tree_digest(ran) == before_tree and git_state(ran) == before_git
    _no_worktrees_left(ran)


def test_the_commit_msg_hook_runs_on_the_commit(ran):
    _hook(ran, "commit-msg", 'echo "Reviewed-by: the commit-msg hook" >> "$1"\n')
    result = apply(ran)
    assert result.status == "committed", result.message
    message = git.Repo(ran).commit(result.branch).message
    assert message.startswith("infrarsi: ") and "Reviewed-by: the commit-msg hook" in message


@pytest.mark.parametrize("run_id", ["../../main", "x y", "20260101-000000-abcd; rm -rf ~", "-f", ""])
def test_a_tampered_run_id_is_refused_before_anything_is_built(ran, run_id):
    run = load_run(ran)
    run.run_id = run_id
    save_run(run, ran)
    before_tree, before_git = tree_digest(ran), git_state(ran)
    result = apply(ran)
    assert result.status == "refused" and "run_id" in result.message, result.message
    assert tree_digest(ran) == before_tree and git_state(ran) == before_git
    _no_worktrees_left(ran)


def _promote_llm_diff(repo: Path, text: str) -> str:
    """Store ``text`` where the run stores LLM diffs and make it the promoted candidate's patch."""
    from infrarsi.patches.llm_proposals import diff_id
    from infrarsi.records.files import patch_dir

    ident = diff_id(text)
    patch_dir(repo).mkdir(parents=True, exist_ok=True)
    (patch_dir(repo) / f"{ident}.diff").write_text(text)
    run = load_run(repo)
    run.promoted.candidate = type(run.promoted.candidate)(knobs=dict(BEST), patches=(f"llm:{ident}",))
    save_run(run, repo)
    return f"llm:{ident}"


_STEP_LINE = '    parser.add_argument("--seed", type=int, default=1337, help="random seed")\n'
_LLM_EDIT = ("--- a/train.py\n+++ b/train.py\n@@ -25,3 +25,4 @@ def main() -> None:\n"
             '     parser.add_argument("--seed", type=int, default=1337, help="random seed")\n'
             "     args = parser.parse_args()\n+    # reviewed by a model: nothing to change here\n \n")


def test_a_promoted_llm_diff_is_found_where_the_run_stored_it_and_committed(ran):
    """The run stores LLM diffs in the user's .infrarsi/patches (untracked); the temporary
    worktree apply builds its commit in has none of it."""
    assert _STEP_LINE in (ran / "train.py").read_text()
    name = _promote_llm_diff(ran, _LLM_EDIT)
    before_tree = tree_digest(ran)
    result = apply(ran)
    assert result.status == "committed", result.message
    assert result.paths == ["train.py"] and f"Patches: {name}" in result.commit_message
    committed = git.Repo(ran).commit(result.branch).tree["train.py"].data_stream.read().decode()
    assert "# reviewed by a model: nothing to change here" in committed
    assert tree_digest(ran) == before_tree
    _no_worktrees_left(ran)


@pytest.mark.parametrize("extra,reason", [
    ("diff --git a/__pycache__/data.cpython-311.pyc b/__pycache__/data.cpython-311.pyc\n"
     "new file mode 100644\nindex 0000000..1111111\nGIT binary patch\nliteral 4\nLcmZ?wbYNfr0000\n\nliteral 0\n"
     "HcmV?d00001\n\n", "binary patch"),
    ("diff --git a/data.py b/data2.py\nsimilarity index 100%\nrename from data.py\nrename to data2.py\n", "rename"),
    ("diff --git a/train.py b/train.py\nold mode 100644\nnew mode 100755\n", "mode change"),
], ids=["binary", "rename", "mode"])
def test_apply_refuses_an_llm_diff_with_extended_headers(ran, extra, reason):
    _promote_llm_diff(ran, extra + _LLM_EDIT)
    before_tree, before_git = tree_digest(ran), git_state(ran)
    result = apply(ran)
    assert result.status == "error" and f"contract: {reason}" in result.message, result.message
    assert tree_digest(ran) == before_tree and git_state(ran) == before_git
    _no_worktrees_left(ran)


def test_apply_refuses_an_llm_diff_edited_after_the_run(ran):
    name = _promote_llm_diff(ran, _LLM_EDIT)
    stored = ran / ".infrarsi" / "patches" / f"{name[4:]}.diff"
    stored.write_text(_LLM_EDIT.replace("nothing to change here", "import subprocess"))
    result = apply(ran)
    assert result.status == "error" and "changed after it was proposed" in result.message, result.message
