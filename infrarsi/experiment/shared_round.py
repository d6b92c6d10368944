"""One round of a study that several workers may share: what each trial kind needs from the others.

A round is everything one ``infrarsi run`` adds to the study (trial numbers from where it found the
study). Workers pointed at the same storage coordinate through the study's trials alone:

- a trial the round needs once whoever runs it (the baseline, a patch's validation) is run by the
  first worker to ask; the others wait for its result, and run it themselves when that worker dies
  (its trial fails as stale);
- search trials are proposed with what the others are measuring counted as taken, and of two
  workers that still propose the same candidate at once the later-numbered trial gives way;
- verification runs once per round: each worker that ends its search bids with a claim trial, the
  lowest-numbered standing claim wins (numbers are assigned atomically by the storage), the winner
  waits for the measuring trials still running elsewhere, verifies and stores the outcome on its
  claim; the others defer to it and read the outcome. A winner that dies stops beating its
  heartbeat, its claim fails as stale and the waiting workers bid again.

The stage says what to run and how to verify (callables); this module only says when.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from infrarsi.experiment.concluded import Conclusion
from infrarsi.experiment.store import State, TrialRecord, TrialStore
from infrarsi.trials import Candidate, TrialResult

MEASURING = ("baseline", "validation", "search")
"""Trial kinds whose results the search and verification rank."""
CLAIM = "claim"
WAIT_POLL_S = 1.0
"""How often a worker waiting on another looks at the study."""
MAX_GIVE_WAYS = 20
"""Search trials in a row a worker may give way to others before the study looks inconsistent."""

ProposedTrial = Callable[[tuple[str, ...]], TrialResult | None]
"""A search trial to run, given the kinds of another worker's trial of the same candidate begun
first that it gives way to: its result, or None when it gave way."""


class KeptGivingWay(Exception):
    """A worker gave way more than ``MAX_GIVE_WAYS`` times in a row: the study's running trials look
    inconsistent."""


class SharedRound:
    def __init__(self, store: TrialStore):
        self.store = store
        self.first_number = store.count()
        """Trials numbered from here on belong to this round."""

    def claims(self) -> list[TrialRecord]:
        """Bids on this round's verification, still standing: running, or finished with an outcome."""
        return [r for r in self.store.records()
                if r.number >= self.first_number and r.kind == CLAIM and r.deferred_to is None
                and (r.state is State.RUNNING or r.outcome is not None)]

    def once(self, candidate: Candidate, kind: str, run: Callable[[], TrialResult | None]) -> TrialResult:
        """The round's result for ``candidate`` as ``kind``: another worker's when it has one (ok, of
        this round, or the one waited for; an older failure is run again), after waiting while
        another runs it; else ``run()``'s (None: another worker began it first, look again)."""
        key = candidate.key()
        waited: set[int] = set()
        while True:
            self.store.fail_stale()
            same = [r for r in self.store.records() if r.kind == kind and r.candidate is not None
                    and r.candidate.key() == key and r.duplicate_of is None]
            finished = [r.result for r in same if r.result is not None
                        and (r.number >= self.first_number or r.number in waited or r.state is State.COMPLETE)]
            if finished:
                return next((r for r in finished if r.ok), finished[-1])
            running = {r.number for r in same if r.state is State.RUNNING}
            if running:
                waited |= running
                time.sleep(WAIT_POLL_S)
                continue
            result = run()
            if result is not None:
                return result

    def run_proposals(self, next_trial: Callable[[list[TrialResult], list[Candidate]], ProposedTrial | None], *,
                      ended: Callable[[], str], gives_way: bool) -> str | None:
        """Search trials one after another, as workers sharing the study take them, until ``ended()``
        says why (the budget: returned) or none is proposed while no other worker is measuring
        (None). ``next_trial(history, taken)`` is asked with the study's measured trials and the
        candidates other workers are measuring now, taken so that two workers asking at once get
        different answers; it gives the trial to run, or None. With none while others measure,
        the worker waits (a trial of theirs may fail and be worth proposing again) and asks again.
        Two workers may still propose one candidate in the same instant: with ``gives_way`` the
        later-numbered trial gives way (a sampler that repeats measured candidates means it, and
        never does); more than ``MAX_GIVE_WAYS`` in a row raise ``KeptGivingWay``."""
        given_way = 0
        while True:
            why = ended()
            if why:
                return why
            history = self.store.history()
            running = self.store.running_candidates(MEASURING)
            trial = next_trial(history, running)
            if trial is None:
                if running:
                    time.sleep(WAIT_POLL_S)
                    self.store.fail_stale()
                    continue
                return None
            if trial(MEASURING if gives_way else ()) is not None:
                given_way = 0
                continue
            given_way += 1
            if given_way > MAX_GIVE_WAYS:
                raise KeptGivingWay(f"gave way to other workers {MAX_GIVE_WAYS} times in a row: the study's running "
                                    "trials look inconsistent")

    def conclude(self, verify: Callable[[], Conclusion], *, wait_limit_s: float) -> tuple[Conclusion, int | None]:
        """Verification, once for the round, and who did it. Here (None beside the conclusion): after
        the measuring trials other workers are running end (or ``wait_limit_s`` passes), ``verify()``'s
        conclusion is stored on this worker's claim. Elsewhere: the winning claim's conclusion and number."""
        store = self.store
        while True:
            claim = store.marker(CLAIM, round_from=self.first_number)
            standing = self.claims()
            winner = min(standing, key=lambda t: t.number) if standing else None
            if winner is None or winner.number == claim.number:
                try:
                    with store.heartbeat(claim):
                        self._wait_for_running(wait_limit_s)
                        outcome = verify()
                except BaseException:
                    store.close(claim, State.FAIL)
                    raise
                store.settle(claim, outcome)
                return outcome, None
            store.defer(claim, winner.number)
            elsewhere = self._wait_for_outcome()
            if elsewhere is not None:
                return elsewhere

    def _wait_for_running(self, limit_s: float) -> None:
        """Until no other worker is running a measuring trial (they count for the ranking)."""
        limit = time.monotonic() + limit_s
        while time.monotonic() < limit:
            self.store.fail_stale()
            if not any(r.kind in MEASURING for r in self.store.records((State.RUNNING,))):
                return
            time.sleep(WAIT_POLL_S)

    def _wait_for_outcome(self) -> tuple[Conclusion, int] | None:
        """The winning claim's outcome and number; None when no standing claim is left (its worker died)."""
        while True:
            self.store.fail_stale()
            standing = self.claims()
            done = [(r.outcome, r.number) for r in standing if r.outcome is not None]
            if done:
                return min(done, key=lambda d: d[1])
            if not standing:
                return None
            time.sleep(WAIT_POLL_S)
