"""doctor: measure the baseline before tuning it.

Runs the contract's baseline several times as separate processes and turns what it saw into the
numbers every later stage relies on: the noise floor (the smallest speedup worth believing), the
phase split of a step, peak memory against the budget, the machine's peak FLOP/s and the
baseline's MFU, and the loss trajectory with the tolerance the loss invariant uses. The reference
losses and tolerances go back into the contract; everything goes to ``.infrarsi/doctor.json``.
The baseline runs measure the machine's normal background; every run after them (the checksums'
lengths, the reassociation run, the claims' trials) is judged against it and rerun while other
processes disturbed it (``experiment/trial_runner.py``).

How the loss tolerance is chosen is documented in :mod:`infrarsi.noise`. The reassociation run it
uses is the baseline with another micro-batch split of the same global batch: the same
arithmetic in another order, so whatever it changes in the losses is float noise, the most a
numerics-preserving candidate may legitimately change them by.

This module is the stage's order of work; the steps live beside it: the runs and what each
measures in ``doctor_measure``, the contract completed from them in ``doctor_contract``, the
report's summaries in ``doctor_summary`` and what doctor states from them in ``doctor_findings``.
"""

from __future__ import annotations

import shutil
import time
from dataclasses import dataclass, replace
from enum import StrEnum
from pathlib import Path

from infrarsi.background import busy_limit
from infrarsi.contract import ContractError, require_intact, save_contract
from infrarsi.events import Event, EventSink, ignore
from infrarsi.experiment.trial_runner import TrialArgs, TrialRunner
from infrarsi.hardware import fingerprint, machine_peak, precision_peaks
from infrarsi.records.doctor import DoctorError, DoctorReport, save_doctor
from infrarsi.records.files import doctor_logs_dir
from infrarsi.runner import accounting, interference
from infrarsi.runner.sandbox import bwrap_problem, mode_words
from infrarsi.stages.doctor_contract import measured_contract
from infrarsi.stages.doctor_findings import precision_headroom
from infrarsi.stages.doctor_measure import (
    baseline_run,
    checked_baseline,
    checksum_drift_at,
    gave_results,
    judge_claims,
    launches,
    machine_background,
    peak_flops_of,
    reordering_settings,
    round_cv,
    verification_lengths,
)
from infrarsi.stages.doctor_summary import summarize
from infrarsi.trials import Candidate, TrialResult, TrialStatus
from infrarsi.whole_process import Lengths


class DoctorStatus(StrEnum):
    OK = "ok"
    ERROR = "error"
    """Nothing was written: a bad contract, no sandbox, a baseline that failed or cannot be a reference."""


@dataclass(kw_only=True, slots=True)
class DoctorResult:
    status: DoctorStatus
    message: str
    """The noise floor when ok; what went wrong, with the log to read, when not."""
    report: DoctorReport | None = None

    @property
    def ok(self) -> bool:
        return self.status is DoctorStatus.OK


def doctor(repo: Path, *, repeats: int = 3, on_event: EventSink = ignore, sandbox: bool = True,
           wait_for_quiet: float | None = None) -> DoctorResult:
    """Measure the baseline ``repeats`` times, write the reference losses into the contract and
    ``.infrarsi/doctor.json``; the report, or what failed (status ``error``, nothing written).
    ``wait_for_quiet``: seconds to wait, at most, for a busy machine to become quiet first."""
    if repeats < 2:
        return DoctorResult(status=DoctorStatus.ERROR,
                            message=f"repeats must be at least 2 to measure run-to-run noise, got {repeats}")
    try:
        report = _measure(repo, repeats, on_event, sandbox, wait_for_quiet)
    except (ContractError, DoctorError) as error:
        return DoctorResult(status=DoctorStatus.ERROR, message=str(error))
    return DoctorResult(status=DoctorStatus.OK, message=f"noise floor {report.noise.min_speedup:.3f}×", report=report)


def _measure(repo: Path, repeats: int, on_event: EventSink, sandbox: bool, wait_for_quiet: float | None) -> DoctorReport:
    started = time.perf_counter()
    repo = Path(repo).resolve()  # trials run elsewhere: their log and probe paths must be absolute
    contract = require_intact(repo)
    problem = bwrap_problem() if sandbox else None
    if problem:
        raise DoctorError(problem)
    total = repeats + 3  # the baseline runs, the short run, one reassociation run, the peak measurement
    on_event(Event("doctor", "begin", f"measuring the baseline {repeats} times", 0, total))
    log_root = doctor_logs_dir(repo)
    shutil.rmtree(log_root, ignore_errors=True)  # a run's logs beside the last doctor's would be miscounted
    # The baseline runs measure the machine's normal: nothing they see is judged disturbed.
    runner = TrialRunner.for_stage(repo, contract, "doctor", background=None, wait_for_quiet=wait_for_quiet or None,
                                   sandbox=sandbox, on_event=on_event, show_trials=True)
    idle, waited = machine_background(runner.quiet, on_event)

    runs: list[TrialResult] = []
    length_warning = ""
    for i in range(repeats):
        steps = None
        if i == repeats - 1:
            # The last baseline run is verification's long run: its lengths from the runs before it.
            contract = measured_contract(contract, runs, on_event)
            lengths = verification_lengths(contract, runs)
            steps = lengths.long
        on_event(Event("doctor", "report", f"baseline run {i + 1} of {repeats}", i, total))
        result = baseline_run(runner, i, steps, log_root)
        if steps is not None and steps > contract.workload.total_steps and result.status is TrialStatus.CRASH:
            length_warning = (f"the baseline did not run the {steps} steps chosen for verification ({result.detail[-200:]}); "
                              f"verification runs the contract's {contract.workload.total_steps}, and its intervals are wider")
            lengths = Lengths(short=lengths.short, long=contract.workload.total_steps, planned=lengths.planned)
            result = baseline_run(runner, i, lengths.long, log_root)
        runs.append(checked_baseline(i, result, on_event))
    background = interference.measured_background([r.interference for r in runs], idle, waited)
    contract = measured_contract(contract, runs, on_event)
    # Every later run is judged against the normal the baseline runs measured, and rerun when disturbed.
    runner = replace(runner, contract=contract)
    runner.judge_by(background)
    on_event(Event("doctor", "report", f"the baseline for {lengths.short} steps (verification's reference)",
                   repeats, total))
    short = runner.run(TrialArgs(candidate=Candidate(), name=f"the baseline for {lengths.short} steps",
                                 check_loss=False, steps=lengths.short,
                                 log_dir=log_root / f"baseline-{lengths.short}-steps")).result
    if not gave_results(short):
        raise DoctorError(f"the baseline run of {lengths.short} steps ended {short.status.value}: {short.detail}\n"
                          f"log: {short.log_path}")
    checksums = {n: c for n, c in ((contract.workload.total_steps, runs[0].param_checksum),
                                   (lengths.long, runs[-1].param_checksum),
                                   (lengths.short, short.param_checksum)) if c is not None}

    reorder_knobs = reordering_settings(contract)
    reorder_result = None
    reorder_steps = max(lengths.long, min(contract.loss.compare_steps, contract.workload.total_steps))
    if reorder_knobs:
        # Run to verification's long length: its first steps' losses set the loss tolerance, and
        # its parameters there how far a reorder-only run drifts over the longest run judged.
        on_event(Event("doctor", "report", f"reassociation run with {reorder_knobs}", repeats + 1, total))
        reorder_result = runner.run(TrialArgs(
            candidate=Candidate(knobs=reorder_knobs), name="the reassociation run", check_loss=False,
            steps=reorder_steps, log_dir=log_root / "reassociation")).result

    on_event(Event("doctor", "report", "measuring the machine's peak FLOP/s", total - 1, total))
    hardware = fingerprint()
    peak, devices, peak_warning = peak_flops_of(contract, hardware)

    try:
        report = summarize(contract, runs, reorder_knobs, reorder_result, hardware, peak, devices)
    except ValueError as err:  # a baseline whose losses cannot serve as the reference
        raise DoctorError(f"{err}\nlog: {runs[0].log_path}") from None
    report.checksums = checksums
    report.reassociation_drift = checksum_drift_at(reorder_result, checksums.get(reorder_steps), reorder_steps)
    report.warnings += [length_warning] if length_warning else []
    report.verification_steps = [lengths.short, lengths.long]
    report.reference_pair = [short.to_dict(), runs[-1].to_dict()] if short.ok and runs[-1].process_s else []
    report.round_cv = round_cv(lengths, runs)
    startups = [r.startup_s for r in runs if r.startup_s is not None]
    report.startup_limit_s = accounting.startup_limit(startups) if startups else None
    if peak_warning:
        report.warnings.append(peak_warning)
    report.efficiency.machine_peak = machine_peak(contract.memory.device, hardware)
    report.efficiency.peaks = precision_peaks(peak, hardware) if peak is not None else []
    report.findings += precision_headroom(report.efficiency)
    report.background = background
    if report.background.busy:
        report.warnings.append(
            f"the machine was too busy to measure on: other processes used {idle:.2f} of the job's "
            f"{report.background.cores} cores before the baseline ran (more than "
            f"{busy_limit(report.background.cores):.2f}); the noise floor and the normal background "
            "include them (`--wait-for-quiet` waits for quiet first)")
    updated = contract.with_reference(report.losses.reference, report.losses.tolerance,
                                      report.losses.numerics_tolerance)
    updated = judge_claims(replace(runner, contract=updated), runs, report, log_root)
    save_contract(updated, repo)
    report.contract_hash = updated.digest()
    report.wall_s = time.perf_counter() - started
    report.launches = launches(log_root)
    report.sandbox = mode_words(sandbox)
    save_doctor(report, repo)
    on_event(Event("doctor", "end", f"noise floor {report.noise.min_speedup:.3f}×", total, total))
    return report
