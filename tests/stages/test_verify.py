"""verify: a commit and its base rerun interleaved in temporary worktrees; exit 1 when not faster."""

from __future__ import annotations

import json
import re
from pathlib import Path

import git

from infrarsi.cli import main
from infrarsi.stages.apply import apply
from infrarsi.stages.verify import VerifyResult, VerifyStatus, could_hold, verify
from infrarsi.whole_process import Rounds
from tests.stages.conftest import USER, git_state, tree_digest


def _commit_edit(repo: Path, edit, message: str) -> str:
    """The user commits an edit of train.py on their branch; the sha."""
    train = repo / "train.py"
    train.write_text(edit(train.read_text()))
    g = git.Repo(repo)
    g.index.add(["train.py"])
    return g.index.commit(message, author=USER, committer=USER).hexsha


def _set_default(source: str, flag: str, value: str) -> str:
    changed, n = re.subn(rf'("--{flag}", type=int, default=)\d+', rf"\g<1>{value}", source)
    assert n == 1, flag
    return changed


def test_the_applied_commit_holds(ran, capsys):
    applied = apply(ran)
    assert applied.status == "committed", applied.message
    before_tree, before_git = tree_digest(ran), git_state(ran)
    code = main(["verify", str(ran), applied.branch, "--json"])
    shown = json.loads(capsys.readouterr().out)
    assert code == 0, shown
    assert shown["status"] == "holds" and shown["rev"] == applied.commit and shown["base"] == applied.base
    # At least 2 rounds of base and rev, each at two lengths; a run other processes disturbed (after
    # its reruns) only lacks a measurement, and its round is left out.
    assert set(shown["statuses"]) <= {"ok", "disturbed"} and shown["statuses"].count("ok") >= 8, shown["statuses"]
    point, low, _high = shown["speedup"]
    assert low > shown["floor"] and point > 3  # the paced best is ~5x the baseline
    assert shown["recorded"] is not None and shown["speedup"][2] >= shown["recorded"][1]
    # The user's checkout is untouched; the worktrees are gone.
    assert git_state(ran) == before_git
    assert {k: v for k, v in tree_digest(ran).items() if not k.startswith(".infrarsi/verify/")} == \
        {k: v for k, v in before_tree.items() if not k.startswith(".infrarsi/verify/")}


def test_a_commit_that_only_edits_a_comment_does_not_hold(prepared, capsys):
    sha = _commit_edit(prepared, lambda s: s.replace('"""A paced stand-in', '"""(Reviewed.) A paced stand-in'),
                       "docs: a comment")
    code = main(["verify", str(prepared), sha, "--rounds", "2", "--json"])
    shown = json.loads(capsys.readouterr().out)
    assert code == 1, shown
    assert shown["status"] == "regressed" and shown["recorded"] is None, shown
    point, low, _high = shown["speedup"]
    assert low <= shown["floor"] and 0.9 < point < 1.1


def test_a_slower_commit_does_not_hold(prepared, capsys):
    slower = lambda s: _set_default(_set_default(s, "threads", "1"), "micro_batch_size", "1")  # noqa: E731
    sha = _commit_edit(prepared, slower, "use fewer resources")
    code = main(["verify", str(prepared), sha, "--rounds", "2", "--json"])
    shown = json.loads(capsys.readouterr().out)
    assert code == 1 and shown["status"] == "regressed" and shown["message"].startswith("does not hold"), shown
    point, _low, high = shown["speedup"]
    assert point < 0.8 and high < 1  # about half the baseline's speed, by construction
    assert shown["rev_job_s"] and min(shown["rev_job_s"]) > max(shown["base_job_s"])


def test_verify_reports_a_rev_that_crashes(prepared):
    sha = _commit_edit(prepared, lambda s: s.replace("    args = parser.parse_args()\n",
                                                     "    args = parser.parse_args()\n    raise SystemExit('broken')\n"),
                       "break it")
    result = verify(prepared, sha, rounds=Rounds(least=2, most=2))
    assert result.status == "failed" and "crash" in result.message and "broken" in result.message


def test_an_unknown_revision_is_an_error(prepared, capsys):
    assert main(["verify", str(prepared), "infrarsi/no-such-run"]) == 1
    assert "unknown revision" in capsys.readouterr().err


def test_more_rounds_only_while_the_commit_could_still_hold():
    rounds = Rounds()

    def after(speedup, measured=rounds.least, recorded=None) -> VerifyResult:
        return VerifyResult(status=VerifyStatus.REGRESSED, message="", speedup=speedup, recorded=recorded,
                            base_job_s=[1.0] * measured, rev_job_s=[1.0] * measured)

    # As fast as its base: the point is at the floor, so no number of rounds lifts the low past it.
    assert not could_hold(after((1.005, 0.95, 1.06)), rounds.least, rounds)
    # 1.2x on wide noise: in reach of the floor, so verification goes on; at the last round it stops.
    assert could_hold(after((1.2, 0.9, 1.6)), rounds.least, rounds)
    assert not could_hold(after((1.2, 0.9, 1.6), measured=rounds.most), rounds.most, rounds)
    # A disturbed round measured nothing: the rounds left count from what was measured.
    assert not could_hold(after((1.2, 0.9, 1.6), measured=2), rounds.most, rounds)
    # The interval's top under the low apply recorded: it cannot hold what the commit claims.
    assert not could_hold(after((1.2, 0.9, 1.6), recorded=(2.0, 1.7, 2.3)), rounds.least, rounds)
