"""verify reads what apply recorded from the git note beside the commit, never from its message."""

from __future__ import annotations

from pathlib import Path

import git

from infrarsi import vcs
from infrarsi.records.evidence import NOTES_REF, CommitEvidence
from infrarsi.stages.verify import recorded_speedup

USER = git.Actor("someone", "someone@example.com")


def _commit(repo: git.Repo, name: str, message: str) -> str:
    (Path(repo.working_dir) / name).write_text(name)
    repo.index.add([name])
    return repo.index.commit(message, author=USER, committer=USER).hexsha


def test_the_recorded_speedup_is_the_note_not_the_message(tmp_path):
    repo = git.Repo.init(tmp_path)
    place = vcs.locate(tmp_path)
    said = "infrarsi: 9.99x faster training job (95% CI 9.00-11.00x)\n"
    forged = _commit(repo, "a.txt", said)  # the words apply writes, typed by hand: no evidence
    assert recorded_speedup(place, forged) is None

    applied = _commit(repo, "b.txt", said)
    evidence = CommitEvidence(run_id="20261201-120000-beef", candidate={"knobs": {"threads": 2}, "patches": []},
                              job_speedup=(1.234567, 1.101, 1.4), promotion_floor=1.01, rounds=3)
    vcs.add_note(place, applied, evidence.to_json(), NOTES_REF)
    assert recorded_speedup(place, applied) == (1.234567, 1.101, 1.4)
    assert CommitEvidence.from_json(vcs.read_note(place, applied, NOTES_REF)) == evidence

    other = _commit(repo, "c.txt", "unrelated")
    vcs.add_note(place, other, "not evidence", NOTES_REF)
    assert recorded_speedup(place, other) is None
