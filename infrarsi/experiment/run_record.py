"""The run's record (``RunResult``, run.json), built once from what the stage knew before the first
trial and what each step of the engine returned: the search, the conclusion and the summary."""

from __future__ import annotations

from dataclasses import dataclass

from infrarsi.experiment.concluded import Conclusion
from infrarsi.experiment.search_loop import SearchOutcome
from infrarsi.experiment.summary import RunSummary
from infrarsi.records import PatchCheck, RunResult


@dataclass(frozen=True, kw_only=True, slots=True)
class RunStart:
    """What the run stage knows before the first trial."""

    run_id: str
    started: str
    sampler: str
    storage_url: str
    """The study's storage, its password hidden."""
    study_name: str
    sandbox: str
    noise_floor: float
    """Doctor's one-run floor."""
    priors_source: str
    skipped: tuple[PatchCheck, ...]
    """Patches refused before the search (not applicable, proposals rejected): listed after the search's checks."""


def run_record(start: RunStart, searched: SearchOutcome, concluded: Conclusion, summary: RunSummary) -> RunResult:
    """The record of a run; a search cut short gives what it had (``SearchOutcome``)."""
    return RunResult(
        status=concluded.status, message=concluded.message, run_id=start.run_id, sampler=start.sampler,
        storage_url=start.storage_url, study_name=start.study_name, sandbox=start.sandbox, started=start.started,
        baseline=searched.baseline, trials=list(summary.trials),
        patch_checks=[*searched.patch_checks, *start.skipped], verdicts=list(concluded.verdicts),
        promoted=concluded.promoted, noise_floor=start.noise_floor, search_ended=searched.ended,
        spent_s=summary.spent_s, interrupted_s=summary.interrupted_s, prior_checks=list(summary.prior_checks),
        memory_prices=list(summary.memory_prices), priors_source=start.priors_source,
        bank_priors=list(summary.bank_priors), disturbance=summary.disturbance,
    )
