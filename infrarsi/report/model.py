"""The report as one value: baseline against promoted, every trial and its cost, memory prices,
priors against what the trials showed, and exactly what each verified candidate changes.

Built from what earlier stages saved (the contract, ``doctor.json``, ``run.json`` and the study's
trials); nothing here measures or estimates anything new. Every number is one of theirs or a
ratio of theirs, and where a number is missing the field is None rather than a guess.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from infrarsi.contract import Contract, KnobValue
from infrarsi.records import (
    BankPriorRow,
    DoctorReport,
    MemoryPriceRow,
    PatchCheck,
    PeakFlops,
    PriorCheckRow,
    RunResult,
    Verdict,
)
from infrarsi.report.disturbance import words as disturbance_words
from infrarsi.report.no_promotion import NoPromotion, explain
from infrarsi.report.reproduce import reproduce_command
from infrarsi.report.setting import changed_knobs, describe
from infrarsi.report.utilization import (
    candidate_peak,
    flops_per_step,
    machine_devices,
    machine_words,
    peak_words,
    step_mfu,
)
from infrarsi.runner.command import patches_to_apply
from infrarsi.trials import Candidate, TrialResult, TrialStatus
from infrarsi.whole_process import job_seconds

if TYPE_CHECKING:
    # The stored trials come from the report stage, which opens the study: the report reads what
    # the engine wrote without importing it (tests/test_layers.py).
    from infrarsi.experiment.store import StoredTrial

FAILED = tuple(s.value for s in TrialStatus if s is not TrialStatus.OK)
INTERRUPTED = "interrupted"
"""Not a trial status: the cost of trials stopped by Ctrl-C or a dying worker, which left no result."""


@dataclass(kw_only=True, slots=True)
class Side:
    """One configuration's numbers, all taken from the same set of runs so they agree."""

    step_s: float | None
    """Median over runs of each run's median step time."""
    tokens_per_s: float | None
    mfu: float | None
    """Of the job's own peak: its threads, its precision (``report.utilization``)."""
    peak_bytes: int | None
    """Largest peak over the runs."""
    job_s: float | None
    """Projected job: start-up plus the contract's planned steps."""
    runs: int
    source: str
    """Which runs these are (interleaved re-verification, the run's baseline trial, doctor)."""
    machine_mfu: float | None = None
    """Of the machine's peak: every core or GPU, its fastest dtype."""
    mfu_dtype: str = ""
    """The precision of the peak ``mfu`` is of (the one this side's matmuls run in); empty without MFU."""


@dataclass(kw_only=True, slots=True)
class TrialLine:
    number: int
    kind: str
    """baseline | validation | search | verification."""
    status: str
    setting: str
    """What differs from the baseline: changed knobs and patches."""
    step_s: float | None
    peak_bytes: int | None
    wall_s: float
    start_s: float
    """Seconds of trial time spent before this trial began (trials laid end to end)."""
    reason: str
    """Why the search chose it."""
    detail: str
    """Why it ended this way."""


@dataclass(kw_only=True, slots=True)
class StatusCost:
    status: str
    trials: int
    wall_s: float


@dataclass(kw_only=True, slots=True)
class HunkLine:
    path: str
    header: str
    text: str


@dataclass(kw_only=True, slots=True)
class Audit:
    """One re-verified candidate: the verdict, what it changes in the source, how to run it."""

    setting: str
    candidate: dict[str, Any]
    promoted: bool
    """The one candidate the run promoted (the fastest of those that cleared the floor)."""
    cleared: bool
    """Its interval cleared the promotion floor (a slower one that also cleared is not promoted)."""
    reason: str
    job_speedup: tuple[float, float, float] | None
    """Whole processes, at the owner's planned length: what decided."""
    step_speedup: tuple[float, float, float] | None
    """Whole processes, per step."""
    record_step_speedup: tuple[float, float, float] | None
    """Per step as the job's step records tell it: beside the whole-process figure, never deciding."""
    max_loss_diff: float | None
    trial: int | None
    """The trial whose workspace the hunks come from (``infrarsi apply --candidate``)."""
    paths: list[str]
    hunks: list[HunkLine]
    command: str
    """The shell command that runs this configuration from the repo root."""
    source_settings: dict[str, KnobValue]
    """Changed knobs with no command-line flag: they are written into the source (see hunks)."""
    patches: list[str]
    """Its patches, and those a knob it sets implies (``runner.command.patches_to_apply``)."""

    @property
    def in_source(self) -> list[str]:
        """What ``infrarsi apply`` must write into the source before ``command`` runs this
        configuration (``attention=sdpa``, ``+sdpa_attention``); empty: the command alone does."""
        return [*(f"{k}={v}" for k, v in self.source_settings.items()), *(f"+{p}" for p in self.patches)]


@dataclass(frozen=True, slots=True)
class StageCost:
    """What one part of the answer cost: whole processes launched and their wall seconds."""

    stage: str
    """doctor | search | verification."""
    launches: int
    wall_s: float


PROOF = ("doctor", "verification")
"""The stages that prove the answer rather than find it."""


def stage_costs(doctor: DoctorReport, run: RunResult) -> list[StageCost]:
    """Doctor's launches and seconds, then the run's trials split into the search (its baseline,
    validations, search trials and reruns) and re-verification."""
    verification = [t for t in run.trials if t.kind == "verification"]
    search = [t for t in run.trials if t.kind != "verification"]
    return [StageCost("doctor", doctor.launches, doctor.wall_s),
            StageCost("search", len(search), sum(t.wall_s for t in search)),
            StageCost("verification", len(verification), sum(t.wall_s for t in verification))]


@dataclass(kw_only=True, slots=True)
class Report:
    repo: str
    run_id: str
    run_status: str
    run_message: str
    sampler: str
    sandbox: str
    """How the trials ran: bubblewrap, or off (--no-sandbox)."""
    started: str
    priors_source: str
    hardware: str
    device: str
    budget_bytes: int
    tokens_per_step: int
    planned_steps: int
    planned_from: str = ""
    """Where the job's length came from (``Workload.planned_from``; empty in a contract older than it)."""
    noise_floor: float
    promotion_floor: float
    peak_flops: str
    """What MFU is measured against (value and source), empty when there is no MFU."""
    baseline: Side
    promoted: Side | None
    job_speedup: tuple[float, float, float] | None
    """Promoted over baseline job time: (point, 95% low, 95% high)."""
    step_speedup: tuple[float, float, float] | None
    trials: list[TrialLine]
    by_status: list[StatusCost]
    search_ended: str
    """What stopped the search asking for trials."""
    spent_s: float
    interrupted_s: float
    failed_s: float
    """Wall seconds of every trial that did not end ok, plus interrupted seconds."""
    patch_checks: list[PatchCheck]
    audits: list[Audit]
    memory_prices: list[MemoryPriceRow]
    prior_checks: list[PriorCheckRow]
    bank_priors: list[BankPriorRow] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    """What the report could not show, and why."""
    interference: list[str] = field(default_factory=list)
    """How much of the run other processes disturbed and what was rerun (``report.disturbance.words``)."""
    machine_peak: str = ""
    """The machine's peak that ``Side.machine_mfu`` is of, in words; empty when doctor measured none."""
    no_promotion: NoPromotion | None = None
    """Why nothing was promoted and what to try next; None when a candidate was."""
    costs: list[StageCost] = field(default_factory=list)
    """Doctor, search and verification: launches and seconds (``stage_costs``)."""

    def cost(self, stages: tuple[str, ...]) -> StageCost:
        """The launches and seconds of ``stages`` together."""
        mine = [c for c in self.costs if c.stage in stages]
        return StageCost(" + ".join(stages), sum(c.launches for c in mine), sum(c.wall_s for c in mine))

    @property
    def promoted_audit(self) -> Audit | None:
        return next((a for a in self.audits if a.promoted), None)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _median(values: list[float]) -> float | None:
    clean = [v for v in values if v is not None and math.isfinite(v)]
    return statistics.median(clean) if clean else None


def _side(step_s: float | None, peak: int | None, job_s: float | None, runs: int, source: str,
          contract: Contract, doctor: DoctorReport, flops_peak: PeakFlops | None = None) -> Side:
    tokens = contract.workload.tokens_per_step
    eff, flops = doctor.efficiency, flops_per_step(contract, doctor)
    peak_of = flops_peak or eff.peak
    utilization = step_mfu(step_s, flops, peak_of, eff.devices)
    return Side(step_s=step_s, tokens_per_s=tokens / step_s if step_s and tokens else None,
                mfu=utilization, mfu_dtype=peak_of.dtype if utilization is not None and peak_of else "",
                machine_mfu=step_mfu(step_s, flops, eff.machine_peak, machine_devices(doctor)),
                peak_bytes=peak, job_s=job_s, runs=runs, source=source)


def _max_peak(results: list[TrialResult]) -> int | None:
    peaks = [r.peak_bytes for r in results if r.peak_bytes]
    return max(peaks) if peaks else None


def _baseline_side(run: RunResult, contract: Contract, doctor: DoctorReport, base_key: str | None,
                   stored: list[StoredTrial]) -> Side:
    """The baseline from the reruns the speedup was computed from, else the run's baseline trial,
    else doctor: the first that exists, and only from that one."""
    verdict = next((v for v in run.verdicts if v.base_step_s), None)
    if verdict is not None:
        reruns = [s.result for s in stored if s.kind == "verification" and s.result.ok
                  and s.result.candidate.key() == base_key]
        return _side(_median(verdict.base_step_s), _max_peak(reruns), _median(verdict.base_job_s),
                     len(verdict.base_step_s), "interleaved re-verification reruns", contract, doctor)
    if run.baseline is not None:
        base = run.baseline
        return _side(base.step_time, base.peak_bytes, job_seconds(base, contract.workload.planned_steps), 1,
                     "the run's baseline trial", contract, doctor)
    return _side(doctor.noise.step_s, doctor.memory.peak_bytes, doctor.efficiency.projected_job_s, len(doctor.runs),
                 f"doctor's {len(doctor.runs)} baseline runs", contract, doctor)


def _promoted_side(verdict: Verdict, contract: Contract, doctor: DoctorReport) -> Side:
    return _side(_median(verdict.cand_step_s), verdict.peak_bytes, _median(verdict.cand_job_s),
                 len(verdict.cand_step_s), "interleaved re-verification reruns", contract, doctor,
                 candidate_peak(verdict.candidate, contract, doctor))


def _trial_lines(run: RunResult, contract: Contract) -> list[TrialLine]:
    lines, elapsed = [], 0.0
    for row in sorted(run.trials, key=lambda r: r.number):
        lines.append(TrialLine(
            number=row.number, kind=row.kind, status=row.status,
            setting=describe(Candidate.from_dict(row.candidate), contract),
            step_s=row.step_s, peak_bytes=row.peak_bytes, wall_s=row.wall_s, start_s=elapsed,
            reason=row.reason, detail=row.detail,
        ))
        elapsed += row.wall_s
    return lines


def _by_status(lines: list[TrialLine], interrupted_s: float) -> list[StatusCost]:
    order = [s.value for s in TrialStatus]
    seen = sorted({line.status for line in lines}, key=lambda s: order.index(s) if s in order else len(order))
    out = [StatusCost(status=s, trials=sum(1 for line in lines if line.status == s),
                      wall_s=sum(line.wall_s for line in lines if line.status == s)) for s in seen]
    if interrupted_s > 0:
        # The count of interrupted trials is not in run.json, only their seconds.
        out.append(StatusCost(status=INTERRUPTED, trials=0, wall_s=interrupted_s))
    return out


def _audit(verdict: Verdict, contract: Contract, stored: list[StoredTrial], promoted: Verdict | None) -> Audit:
    key = verdict.candidate.key()
    mine = [s for s in stored if s.result.candidate.key() == key]
    # A trial's hunks are what its workspace differed by from the repo: the same for every trial of
    # the candidate, so the first with any (a verification rerun first) stands for all of them.
    mine.sort(key=lambda s: (s.kind != "verification", s.number))
    shown = next((s for s in mine if s.result.hunks), mine[0] if mine else None)
    hunks = [HunkLine(path=h.path, header=h.header, text=h.text) for h in shown.result.hunks] if shown else []
    changed = changed_knobs(verdict.candidate, contract)
    return Audit(
        setting=describe(verdict.candidate, contract), candidate=verdict.candidate.to_dict(),
        promoted=promoted is not None and promoted.candidate.key() == key, cleared=verdict.promoted,
        reason=verdict.reason, job_speedup=verdict.job_speedup,
        step_speedup=verdict.step_speedup, record_step_speedup=verdict.record_step_speedup,
        max_loss_diff=verdict.max_loss_diff, trial=shown.number if shown else None, paths=sorted({h.path for h in hunks}), hunks=hunks,
        command=reproduce_command(verdict.candidate, contract),
        source_settings={k: v for k, v in changed.items() if not contract.knob(k).flag},
        patches=list(patches_to_apply(contract, verdict.candidate)),
    )


def build_report(repo: str, contract: Contract, doctor: DoctorReport, run: RunResult,
                 stored: list[StoredTrial] | None) -> Report:
    """Gather the report; ``stored`` is the study's trials, None when the study could not be opened."""
    notes: list[str] = list(contract.workload.notes)
    if stored is None:
        notes.append(f"the study {run.study_name!r} at {run.storage_url} could not be opened: "
                     "the source hunks of each candidate are not shown")
    trials = stored or []
    if doctor.contract_hash != contract.digest():
        notes.append("doctor.json was measured under another version of the contract: MFU and the "
                     "fallback baseline numbers may not match this workload; run `infrarsi doctor` again")
    base_key = run.baseline.candidate.key() if run.baseline else None
    baseline = _baseline_side(run, contract, doctor, base_key, trials)
    promoted = _promoted_side(run.promoted, contract, doctor) if run.promoted else None
    lines = _trial_lines(run, contract)
    promoted_peak = candidate_peak(run.promoted.candidate, contract, doctor) if run.promoted else None
    peak = peak_words(doctor, promoted_peak, [("baseline", baseline.machine_mfu)]
                      + ([("promoted", promoted.machine_mfu)] if promoted else [])) if baseline.mfu is not None else ""
    return Report(
        repo=str(repo), run_id=run.run_id, run_status=run.status, run_message=run.message, sampler=run.sampler,
        sandbox=run.sandbox or "not recorded",
        started=run.started, priors_source=run.priors_source, hardware=doctor.hardware.describe(),
        device=contract.memory.device, budget_bytes=contract.memory.budget_bytes,
        tokens_per_step=contract.workload.tokens_per_step, planned_steps=contract.workload.planned_steps,
        planned_from=contract.workload.planned_from,
        noise_floor=run.noise_floor, promotion_floor=run.promotion_floor, peak_flops=peak, baseline=baseline,
        promoted=promoted,
        job_speedup=run.promoted.job_speedup if run.promoted else None,
        step_speedup=run.promoted.step_speedup if run.promoted else None,
        trials=lines, by_status=_by_status(lines, run.interrupted_s), search_ended=run.search_ended,
        spent_s=run.spent_s,
        interrupted_s=run.interrupted_s,
        failed_s=sum(line.wall_s for line in lines if line.status in FAILED) + run.interrupted_s,
        patch_checks=list(run.patch_checks),
        audits=[_audit(v, contract, trials, run.promoted) for v in run.verdicts],
        memory_prices=list(run.memory_prices),
        prior_checks=list(run.prior_checks),
        bank_priors=list(run.bank_priors),
        notes=notes,
        interference=disturbance_words(run.disturbance),
        machine_peak=machine_words(doctor) if baseline.machine_mfu is not None else "",
        no_promotion=explain(run, contract, str(repo), doctor.round_cv) if run.promoted is None else None,
        costs=stage_costs(doctor, run),
    )
