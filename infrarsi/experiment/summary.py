"""The run's summary for run.json: every trial of the study as a row, and what the run made of its
priors, the bank, memory and a busy machine."""

from __future__ import annotations

from dataclasses import dataclass

from infrarsi.experiment import quiet
from infrarsi.experiment.session import TrialSession
from infrarsi.records import BankPriorRow, Disturbance, MemoryPriceRow, PriorCheckRow, TrialRow
from infrarsi.search.strategy import Strategy
from infrarsi.trials import TrialResult
from infrarsi.whole_process import job_seconds


@dataclass(frozen=True, slots=True)
class RunSummary:
    """What the study holds at the run's end, whatever ended it."""

    trials: tuple[TrialRow, ...]
    """Every trial of the study, this run's and earlier runs'."""
    spent_s: float
    """Their wall time."""
    interrupted_s: float
    """What trials stopped by the user or a dying worker cost."""
    prior_checks: tuple[PriorCheckRow, ...]
    bank_priors: tuple[BankPriorRow, ...]
    memory_prices: tuple[MemoryPriceRow, ...]
    disturbance: Disturbance


def summarize(session: TrialSession, context: Strategy) -> RunSummary:
    """The trials, their costs, the prior checks and the disturbance, from the study."""
    planned = session.contract.workload.planned_steps
    stored = session.store.trials()
    trials = [trial_row(s.number, s.kind, s.result, planned, s.reason, s.rerun_of) for s in stored]
    spent_s = sum(s.result.wall_s for s in stored)
    history = [s.result for s in stored]
    return RunSummary(
        trials=tuple(trials), spent_s=spent_s, interrupted_s=session.store.interrupted_seconds(),
        prior_checks=tuple(context.prior_checks(history)), bank_priors=tuple(context.bank_outcomes(history)),
        memory_prices=tuple(context.memory_prices(history)),
        disturbance=quiet.summary(trials, spent_s, session.runner.quiet.waited_s, session.doctor_background,
                                  session.renormalized))


def trial_row(number: int, kind: str, result: TrialResult, planned_steps: int, reason: str,
              rerun_of: int | None) -> TrialRow:
    return TrialRow(
        number=number, kind=kind, status=result.status.value, candidate=result.candidate.to_dict(),
        step_s=result.step_time, job_s=job_seconds(result, planned_steps), peak_bytes=result.peak_bytes,
        wall_s=result.wall_s, detail=result.detail[-300:], reason=reason, rank_peak_bytes=result.rank_peak_bytes,
        load_cores=result.interference.get("mean_load_cores"), rerun_of=rerun_of,
    )
