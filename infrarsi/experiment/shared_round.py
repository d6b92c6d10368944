"""One round of a study that several workers may share: what each trial kind needs from the others.

A round is everything one ``infrarsi run`` adds to the study (trial numbers from where it found the
study). Workers pointed at the same storage coordinate through the study's trials alone:

- a trial the round needs once whoever runs it (the baseline, a patch's validation) is run by the
  first worker to ask; the others wait for its result, and run it themselves when that worker dies
  (its trial fails as stale);
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
from typing import Any

from optuna.trial import FrozenTrial, TrialState

from infrarsi.experiment.store import DUPLICATE_ATTR, KIND_ATTR, RESULT_ATTR, TrialStore
from infrarsi.study_codec import from_params
from infrarsi.trials import Candidate, TrialResult

MEASURING = ("baseline", "validation", "search")
"""Trial kinds whose results the search and verification rank."""
CLAIM = "claim"
OUTCOME_ATTR = "outcome"
DEFERRED_ATTR = "deferred_to"
WAIT_POLL_S = 1.0
"""How often a worker waiting on another looks at the study."""


class SharedRound:
    def __init__(self, store: TrialStore):
        self.store = store
        self.first_number = len(store.frozen())
        """Trials numbered from here on belong to this round."""

    def claims(self) -> list[FrozenTrial]:
        """Bids on this round's verification, still standing: running, or finished with an outcome."""
        return [t for t in self.store.frozen()
                if t.number >= self.first_number and t.user_attrs.get(KIND_ATTR) == CLAIM
                and DEFERRED_ATTR not in t.user_attrs
                and (t.state is TrialState.RUNNING or OUTCOME_ATTR in t.user_attrs)]

    def once(self, candidate: Candidate, kind: str, run: Callable[[], TrialResult | None]) -> TrialResult:
        """The round's result for ``candidate`` as ``kind``: another worker's when it has one (ok, of
        this round, or the one waited for; an older failure is run again), after waiting while
        another runs it; else ``run()``'s (None: another worker began it first, look again)."""
        key = candidate.key()
        waited: set[int] = set()
        while True:
            self.store.fail_stale()
            same = [t for t in self.store.frozen() if t.user_attrs.get(KIND_ATTR) == kind and t.params
                    and from_params(t.params).key() == key and DUPLICATE_ATTR not in t.user_attrs]
            finished = [TrialResult.from_dict(t.user_attrs[RESULT_ATTR]) for t in same if RESULT_ATTR in t.user_attrs
                        and (t.number >= self.first_number or t.number in waited or t.state is TrialState.COMPLETE)]
            if finished:
                return next((r for r in finished if r.ok), finished[-1])
            running = {t.number for t in same if t.state is TrialState.RUNNING}
            if running:
                waited |= running
                time.sleep(WAIT_POLL_S)
                continue
            result = run()
            if result is not None:
                return result

    def conclude(self, verify: Callable[[], dict[str, Any]], *, wait_limit_s: float) -> tuple[int, dict[str, Any]] | None:
        """Verification, once for the round. Here (None returned): after the measuring trials other
        workers are running end (or ``wait_limit_s`` passes), ``verify()``'s outcome is stored on
        this worker's claim. Elsewhere: the winning claim's number and outcome."""
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
                    store.close(claim, TrialState.FAIL)
                    raise
                claim.set_user_attr(OUTCOME_ATTR, outcome)
                store.close(claim, TrialState.PRUNED)
                return None
            claim.set_user_attr(DEFERRED_ATTR, winner.number)
            store.close(claim, TrialState.PRUNED)
            elsewhere = self._wait_for_outcome()
            if elsewhere is not None:
                return elsewhere

    def _wait_for_running(self, limit_s: float) -> None:
        """Until no other worker is running a measuring trial (they count for the ranking)."""
        limit = time.monotonic() + limit_s
        while time.monotonic() < limit:
            self.store.fail_stale()
            if not any(t.user_attrs.get(KIND_ATTR) in MEASURING for t in self.store.frozen((TrialState.RUNNING,))):
                return
            time.sleep(WAIT_POLL_S)

    def _wait_for_outcome(self) -> tuple[int, dict[str, Any]] | None:
        """The winning claim's outcome; None when no standing claim is left (its worker died)."""
        while True:
            self.store.fail_stale()
            standing = self.claims()
            done = [t for t in standing if OUTCOME_ATTR in t.user_attrs]
            if done:
                best = min(done, key=lambda t: t.number)
                return best.number, best.user_attrs[OUTCOME_ATTR]
            if not standing:
                return None
            time.sleep(WAIT_POLL_S)
