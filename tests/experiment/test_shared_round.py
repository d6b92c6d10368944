"""How workers sharing one study take search trials (experiment/shared_round.py ``run_proposals``):
on a real study in a temporary SQLite file, the trials scripted in-process (no trial runs here)."""

from __future__ import annotations

import pytest

from infrarsi.experiment import shared_round
from infrarsi.experiment.shared_round import MAX_GIVE_WAYS, MEASURING, KeptGivingWay, SharedRound
from infrarsi.experiment.store import TrialStore
from infrarsi.trials import Candidate, TrialResult
from tests.experiment.test_store import contract, result, url

MINE, THEIRS = Candidate(knobs={"micro_batch_size": 4}), Candidate(knobs={"micro_batch_size": 8})


def test_what_others_measure_is_taken_and_waited_for_before_the_search_ends(tmp_path, monkeypatch):
    store = TrialStore.open(contract(), [], storage_url=url(tmp_path))
    theirs = store.begin(THEIRS, "search")  # another worker's, still running
    asked: list[tuple[int, list[Candidate]]] = []

    def theirs_ends(_seconds: float) -> None:
        store.finish(theirs, result(THEIRS))

    monkeypatch.setattr(shared_round.time, "sleep", theirs_ends)

    def nothing(history: list[TrialResult], taken: list[Candidate]) -> None:
        asked.append((len(history), taken))

    assert SharedRound(store).run_proposals(nothing, ended=lambda: "", gives_way=True) is None
    # Asked while theirs ran (taken), then, after waiting, with its result measured and nothing taken.
    assert asked == [(0, [store.candidate_of(theirs)]), (1, [])]


def test_the_budget_ends_it_and_a_trial_is_told_what_it_gives_way_to(tmp_path):
    store = TrialStore.open(contract(), [], storage_url=url(tmp_path))
    ran: list[tuple[str, ...]] = []

    def mine(history: list[TrialResult], taken: list[Candidate]):
        def trial(exclusive: tuple[str, ...]) -> TrialResult:
            ran.append(exclusive)
            return result(MINE)
        return trial

    spent = iter(["", "", "the budget of 2 trials"])
    assert SharedRound(store).run_proposals(mine, ended=lambda: next(spent), gives_way=True) == "the budget of 2 trials"
    assert ran == [MEASURING, MEASURING]
    spent = iter(["", "the budget of 1 trials"])
    SharedRound(store).run_proposals(mine, ended=lambda: next(spent), gives_way=False)
    assert ran[-1] == ()  # a sampler that repeats measured candidates means it: it never gives way


def test_giving_way_too_often_in_a_row_stops_and_a_trial_run_starts_the_count_again(tmp_path):
    store = TrialStore.open(contract(), [], storage_url=url(tmp_path))
    outcomes = [None] * MAX_GIVE_WAYS + [result(MINE)] + [None] * (MAX_GIVE_WAYS + 1)
    calls = 0

    def mine(history: list[TrialResult], taken: list[Candidate]):
        def trial(exclusive: tuple[str, ...]) -> TrialResult | None:
            nonlocal calls
            calls += 1
            return outcomes.pop(0)
        return trial

    with pytest.raises(KeptGivingWay, match=f"gave way to other workers {MAX_GIVE_WAYS} times in a row"):
        SharedRound(store).run_proposals(mine, ended=lambda: "", gives_way=True)
    assert calls == 2 * MAX_GIVE_WAYS + 2 and outcomes == []
