"""The run's summary for run.json: every trial of the study as a row, and what the run made of its
priors, the bank, memory and a busy machine."""

from __future__ import annotations

from infrarsi.experiment import quiet
from infrarsi.experiment.session import TrialSession
from infrarsi.records import PatchCheck, RunResult, TrialRow
from infrarsi.search.strategy import Strategy
from infrarsi.trials import TrialResult
from infrarsi.whole_process import job_seconds


def summarize(session: TrialSession, context: Strategy, result: RunResult, skipped: list[PatchCheck]) -> None:
    """Fills ``result``'s trials, costs, prior checks and disturbance from the study."""
    planned = session.contract.workload.planned_steps
    stored = session.store.trials()
    result.trials = [trial_row(s.number, s.kind, s.result, planned, s.reason, s.rerun_of) for s in stored]
    result.patch_checks = [*result.patch_checks, *skipped]
    result.spent_s = sum(s.result.wall_s for s in stored)
    result.interrupted_s = session.store.interrupted_seconds()
    history = [s.result for s in stored]
    result.prior_checks = context.prior_checks(history)
    result.bank_priors = context.bank_outcomes(history)
    result.memory_prices = context.memory_prices(history)
    result.disturbance = quiet.summary(result.trials, result.spent_s, session.runner.quiet.waited_s,
                                       session.doctor_background, session.renormalized)


def trial_row(number: int, kind: str, result: TrialResult, planned_steps: int, reason: str,
              rerun_of: int | None) -> TrialRow:
    return TrialRow(
        number=number, kind=kind, status=result.status.value, candidate=result.candidate.to_dict(),
        step_s=result.step_time, job_s=job_seconds(result, planned_steps), peak_bytes=result.peak_bytes,
        wall_s=result.wall_s, detail=result.detail[-300:], reason=reason, rank_peak_bytes=result.rank_peak_bytes,
        load_cores=result.interference.get("mean_load_cores"), rerun_of=rerun_of,
    )
