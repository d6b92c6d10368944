"""bench/proposals.py: a recorded run's history, replayed, gives back the run's own search.

The search is a function of what it measured (its randomness is seeded by the trial count), so
asking this checkout's sampler after the first k trials of a finished run must propose trial k+1
as the run did. That is what lets two checkouts be compared on one set of measurements.
"""

from __future__ import annotations

from bench.proposals import proposals
from tests.stages.conftest import copy_repo


def test_replaying_a_run_proposes_each_search_trial_it_ran(paced_run, tmp_path):
    repo = copy_repo(paced_run[0], tmp_path / "paced")
    result = paced_run[1]
    rows = proposals(repo, None, "infrarsi")
    ran = [t for t in result.trials]
    # A disturbed trial's rerun was not asked of the sampler: it repeats the trial it reruns.
    searched = [i for i, t in enumerate(ran) if t.kind == "search" and t.rerun_of is None]
    assert len(searched) >= 3
    for i in searched:
        # After the trials before it, the sampler asks for exactly the candidate trial i ran.
        asked = rows[i - 1]
        assert asked["after"] == i and asked["next"] is not None, asked
        assert asked["next"] == rows[i]["last"], (i, asked, rows[i])
