"""The search: the baseline, each patch validated alone on it, then the strategy's proposals until
the budget or the strategy ends it. Every trial goes through the session (experiment/session.py)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import partial

from infrarsi.experiment.session import TrialSession
from infrarsi.experiment.shared_round import KeptGivingWay, ProposedTrial
from infrarsi.experiment.startup import cannot_pay_back
from infrarsi.records import PatchCheck
from infrarsi.search.space import SearchSpace
from infrarsi.search.strategy import PreparedStrategy, Strategy
from infrarsi.trials import Candidate, TrialResult, TrialStatus

ABORT_FACTOR = 1.5
"""A trial whose measured steps are this much slower than the incumbent's (beyond noise) is stopped early."""


def abort_bound(history: list[TrialResult], noise_floor: float) -> float | None:
    """The step time above which a search trial is stopped early: ``ABORT_FACTOR`` times the fastest
    step measured so far, widened by doctor's one-run noise floor, since the incumbent is the lowest
    of noisy measurements and a trial is judged on a few steps (on 20 ms steps, a candidate 1.66x the
    incumbent by four steps ran under 1.65x of it to the end). None before any trial is measured."""
    incumbent = min((t.step_time for t in history if t.ok and t.step_time), default=None)
    return incumbent * ABORT_FACTOR * max(1.0, noise_floor) if incumbent else None


class SearchStopped(Exception):
    """The search cannot go on (the baseline fails); reported as the run's status, not raised to the user."""


@dataclass(frozen=True, slots=True)
class SearchOutcome:
    """What the search measured and why it ended. A search cut short (a failed baseline, Ctrl-C, a
    machine that changed) has what it got to: no baseline before one was measured, no patch checks
    before the patches were validated, no reason it ended."""

    baseline: TrialResult | None = None
    patch_checks: tuple[PatchCheck, ...] = ()
    """Each patch validated alone on the baseline (or skipped: it cannot pay back its start-up)."""
    ended: str = ""
    """Why it stopped asking for trials: its budget, or nothing left worth a trial."""


class Search:
    """One run's search. ``outcome`` is what it found so far: all of it once ``run`` returns, and
    what there is when the search is cut short, which the run's record still holds; ``prepared``
    the strategy on its space, once the patches are validated."""

    def __init__(self, session: TrialSession, context: Strategy, patch_names: list[str], *,
                 noise_floor: float) -> None:
        """``noise_floor``: doctor's one-run floor, which widens the abort bound (``abort_bound``)."""
        self.session = session
        self.context = context
        self.patch_names = patch_names
        self.noise_floor = noise_floor
        self.outcome = SearchOutcome()
        self.prepared: PreparedStrategy | None = None

    @property
    def strategy(self) -> Strategy:
        """The strategy as the search left it: on its space once the patches were validated, as it
        was given before (re-verification and the summary ask it)."""
        return self.context if self.prepared is None else self.prepared

    def run(self) -> SearchOutcome:
        """The baseline, the patches' validation, then the strategy's proposals."""
        session, context = self.session, self.context
        measured = [s.result for s in session.store.trials(("baseline",)) if s.result.ok]
        base = measured[0] if measured else session.once(context.baseline(), "baseline", reason="baseline")
        if not base.ok:
            raise SearchStopped(f"the baseline itself ended {base.status.value}: {base.detail[-300:]}")
        self.outcome = SearchOutcome(baseline=base)
        session.use_baseline(base)
        checks = validate_patches(session, base, self.patch_names)
        self.outcome = replace(self.outcome, patch_checks=tuple(checks))
        validated = [c.name for c in checks if c.status == "validated"]
        self.prepared = context.prepare(SearchSpace.from_contract(session.contract, validated), self.patch_names)
        self.outcome = replace(self.outcome, ended=self._proposals(self.prepared))
        return self.outcome

    def _proposals(self, strategy: PreparedStrategy) -> str:
        """Trials of the strategy's proposals until the budget or the strategy ends the search (as
        workers sharing the study take them: ``SharedRound.run_proposals``): why it ended."""
        session = self.session
        try:
            ended = session.round.run_proposals(partial(self._next_trial, strategy), ended=session.budget_spent,
                                                gives_way=not strategy.repeats)
        except KeptGivingWay as stuck:
            raise SearchStopped(str(stuck)) from stuck
        return ended if ended is not None else strategy.stop_reason

    def _next_trial(self, strategy: PreparedStrategy, history: list[TrialResult],
                    taken: list[Candidate]) -> ProposedTrial | None:
        """The strategy's next proposal as a search trial, held to the abort bound; what other
        workers are measuring (``taken``) shown to it as tried, a status that teaches the models
        nothing. None: it proposes nothing."""
        abort = abort_bound(history, self.noise_floor)
        proposal = strategy.propose(history + [TrialResult(status=TrialStatus.TIMEOUT, candidate=c) for c in taken])
        if proposal is None:
            return None
        candidate, reason = proposal.candidate, proposal.reason

        def trial(exclusive: tuple[str, ...]) -> TrialResult | None:
            return self.session.execute(candidate, "search", abort_step_time=abort, reason=reason, exclusive=exclusive)

        return trial


def validate_patches(session: TrialSession, baseline: TrialResult, names: list[str]) -> list[PatchCheck]:
    """Each patch once, alone on the baseline: it must apply in scope, import and keep the loss. A
    patch whose one-off start-up alone outlasts the whole job is not tried: it cannot pay back."""
    done = {tuple(s.result.candidate.patches): s.result for s in session.store.trials(("validation",))}
    checks = []
    for name in names:
        result = done.get((name,))
        unpaid = cannot_pay_back(session.contract, name, baseline.step_time) if result is None else None
        if unpaid:
            checks.append(PatchCheck(name=name, status="skipped", reason=unpaid, cost_s=0.0))
            continue
        if result is None:
            if not session.budget_left():
                break
            cand = Candidate(knobs=dict(baseline.candidate.knobs), patches=(name,))
            result = session.once(cand, "validation", reason=f"validate patch {name}")
        status = "validated" if result.ok else result.status.value
        checks.append(PatchCheck(name=name, status=status, reason=result.detail[-300:], cost_s=result.wall_s))
    return checks
