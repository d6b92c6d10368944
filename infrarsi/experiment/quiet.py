"""What a stage does about a busy machine: wait for quiet, rerun disturbed trials, and say so (the
sentences are ``report/disturbance.py``'s). Every stage's trials are rerun by the one trial runner
(``experiment/trial_runner.py``) with the rule here, ``until_undisturbed``.

A trial ends ``disturbed`` when other processes took the job's cores beyond doctor's normal
background (infrarsi/runner/interference.py). Its cost is counted like any failed trial's, it is
never told to the models as slow, and it is rerun at most ``MAX_RERUNS`` times. With
``--wait-for-quiet SECONDS`` the stage first waits until the machine is back to normal, drawing on
that many seconds for the whole run; every wait is reported.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from infrarsi.background import Background
from infrarsi.events import Event, EventSink
from infrarsi.records import Disturbance, Renormalization, RerunRow, TrialRow
from infrarsi.runner.interference import QuietWait, job_cores, wait_for_quiet
from infrarsi.trials import TrialResult, TrialStatus

MAX_RERUNS = 2
"""Reruns of one disturbed trial: the first as it was; the last after measuring the machine's normal
again when the disturbance stayed (experiment/session.py). After them the disturbed result stands
(it teaches the models nothing)."""
NORMAL = "normal"
"""The kind of a baseline trial that measures the machine's normal again (experiment/session.py
``TrialSession._renormalize``): no search trial, not the baseline a round compares with, and never
rerun (it is a measure of the machine, not of a candidate)."""
MAX_SLOWDOWN = 1.5
"""A new normal under which the baseline runs more than this much slower than it did first ends
the run (experiment/session.py ``TrialSession._renormalize``): every trial would then cost that much more, and
what it measured would be compared with trials from a different machine."""


@dataclass(slots=True)
class QuietWaiter:
    """A stage's budget of waiting for quiet, and what it spent."""

    limit_cores: float
    """Other processes' cores above which the machine is not quiet (run: the normal's limit;
    doctor: ``background.busy_limit``)."""
    budget_s: float | None
    """``--wait-for-quiet``: seconds the whole stage may wait (None: it never waits)."""
    stage: str
    on_event: EventSink
    waited_s: float = 0.0

    def wait(self, why: str) -> QuietWait | None:
        """Wait until the machine is quiet or the budget is spent; says that it waits and for how
        long. None: no budget left, nothing sampled."""
        if self.budget_s is None or self.waited_s >= self.budget_s:
            return None
        left = self.budget_s - self.waited_s
        cores = job_cores()

        def waiting(load: float, waited: float) -> None:
            self.on_event(Event(self.stage, "log", f"waiting for quiet ({why}): other processes use {load:.2f} of "
                                                   f"the job's {len(cores)} cores (normal at most {self.limit_cores:.2f}); "
                                                   f"waited {waited:.0f} s of {left:.0f} s"))

        done = wait_for_quiet(left, self.limit_cores, cores=cores, on_wait=waiting)
        self.waited_s += done.waited_s
        state = "quiet" if done.quiet else f"still busy ({done.load_cores:.2f} cores), going on"
        self.on_event(Event(self.stage, "log", f"{state} after waiting {done.waited_s:.0f} s"))
        return done


@dataclass(frozen=True, slots=True)
class Rerun:
    """One rerun of a disturbed trial."""

    attempt: int
    """1 for the first rerun, up to ``MAX_RERUNS``."""
    disturbed: TrialResult
    """The disturbed result it repeats."""

    @property
    def last(self) -> bool:
        """The last rerun: a run measures the machine's normal again before it (experiment/session.py)."""
        return self.attempt == MAX_RERUNS


Result = TypeVar("Result", bound=TrialResult | None)


def until_undisturbed(result: Result, rerun: Callable[[Rerun], Result]) -> Result:
    """``result``, or while it is disturbed what ``rerun`` gives, at most ``MAX_RERUNS`` times. None
    (a trial given up to another worker) is not rerun."""
    attempt = 0
    while result is not None and result.status is TrialStatus.DISTURBED and attempt < MAX_RERUNS:
        attempt += 1
        result = rerun(Rerun(attempt, result))
    return result


def rerun_reason(number: int, reason: str) -> str:
    """The reason a rerun shows people; code reads ``TrialRow.rerun_of``."""
    return f"rerun of trial {number} (disturbed): {reason}"


def summary(rows: list[TrialRow], spent_s: float, waited_s: float, background: Background,
            renormalized: list[Renormalization]) -> Disturbance:
    """How much of the run was disturbed and what was rerun, from its trial rows; ``background`` is
    the normal the run began with (doctor's), ``renormalized`` each time it was measured again."""
    by_number = {r.number: r for r in rows}
    disturbed = [r for r in rows if r.status == TrialStatus.DISTURBED.value]
    reruns = [RerunRow(trial=row.number, of=row.rerun_of, kind=row.kind, candidate=row.candidate, status=row.status,
                       of_detail=by_number[row.rerun_of].detail if row.rerun_of in by_number else "")
              for row in rows if row.rerun_of is not None]
    seconds = sum(r.wall_s for r in disturbed)
    return Disturbance(trials=len(disturbed), of_trials=len(rows), seconds=seconds,
                       share=seconds / spent_s if spent_s else 0.0, reruns=tuple(reruns), waited_s=waited_s,
                       background=background, max_reruns=MAX_RERUNS, renormalized=tuple(renormalized),
                       unresolved=tuple(r.number for r in disturbed
                                        if r.kind != NORMAL and not any(x.of == r.number for x in reruns)))
