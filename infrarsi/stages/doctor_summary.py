"""Doctor's report from its finished baseline runs: the noise floor, the loss tolerance, the
phase split, peak memory against the budget, throughput and MFU (pure: no processes, no files).
"""

from __future__ import annotations

import statistics
from datetime import UTC, datetime

from infrarsi import noise
from infrarsi.contract import Contract, KnobValue
from infrarsi.flops import flops_per_token_from_facts
from infrarsi.probe import PHASES
from infrarsi.records.doctor import BaselineRun, DoctorReport, Efficiency, MemoryUse, PhaseSplit, ReorderRun
from infrarsi.records.hardware import HardwareFingerprint, PeakFlops
from infrarsi.runner import abort
from infrarsi.stages.doctor_findings import where_time_goes
from infrarsi.stages.doctor_measure import gave_results, median_step_s
from infrarsi.trials import TrialResult

PHASE_TOLERANCE = 0.10
"""The probe's phases must cover the step time within this fraction for the split to be trusted."""


def summarize(
    contract: Contract,
    runs: list[TrialResult],
    reorder_knobs: dict[str, KnobValue],
    reorder: TrialResult | None,
    hardware: HardwareFingerprint,
    peak: PeakFlops | None,
    devices: int,
) -> DoctorReport:
    """The report from finished baseline runs (pure: no processes, no files)."""
    warnings: list[str] = []
    step_noise = noise.step_noise([r.step_times for r in runs])

    reorder_losses = [reorder.losses] if reorder is not None and gave_results(reorder) else []
    losses = noise.loss_tolerance([r.losses for r in runs], contract.loss.compare_steps, reorder_losses)
    reorder_run = None
    if reorder_knobs and reorder is not None:
        k = min(contract.loss.compare_steps, len(reorder.losses))
        dev = max((abs(a - b) for a, b in zip(reorder.losses[:k], losses.reference, strict=False)), default=None) \
            if gave_results(reorder) else None
        reorder_run = ReorderRun(knobs=reorder_knobs, status=reorder.status.value, max_deviation=dev,
                                 detail=reorder.detail)
        if not gave_results(reorder):
            warnings.append(f"the reassociation run {reorder_knobs} ended {reorder.status.value}; "
                            "the loss tolerance rests on same-seed repeats and the floor")
    elif not reorder_knobs:
        warnings.append("the contract has no micro-batch or thread knob to reorder the sums with; the loss "
                        "tolerance rests on same-seed repeats and the floor")

    phases = _phase_split(runs)
    if not phases.phases:
        warnings.append("the script reports no phases: wrap its data, forward, backward and optimizer "
                        "code in `with probe.phase(...)` to see where the time goes")
    elif not phases.covered:
        warnings.append(f"the probe's phases cover {phases.coverage:.0%} of the step time, outside "
                        f"±{PHASE_TOLERANCE:.0%}: part of the step is not attributed")

    peaks = [r.peak_bytes for r in runs if r.peak_bytes]
    memory = MemoryUse(peak_bytes=max(peaks) if peaks else 0, budget_bytes=contract.memory.budget_bytes,
                       device=contract.memory.device, ranks=max((len(r.rank_peak_bytes) for r in runs), default=1) or 1)
    if memory.fraction > 0.9:
        warnings.append(f"the baseline peaks at {memory.fraction:.0%} of the memory budget: little room "
                        "for settings that use more memory")

    efficiency = _efficiency(contract, runs, step_noise.step_s, peak, devices, warnings)
    report = DoctorReport(
        created=datetime.now(UTC).isoformat(timespec="seconds"),
        contract_hash=contract.digest(),
        hardware=hardware,
        runs=[
            BaselineRun(status=r.status.value, step_times=list(r.step_times), median_step_s=median_step_s(r),
                        step_cv=noise.cv(r.step_times), startup_s=r.startup_s, wall_s=r.wall_s,
                        peak_bytes=r.peak_bytes, log_path=r.log_path, param_checksum=r.param_checksum,
                        process_s=r.process_s)
            for r in runs
        ],
        param_checksum=runs[0].param_checksum,
        model_facts=dict(runs[0].model_facts),
        noise=step_noise,
        phases=phases,
        memory=memory,
        losses=losses,
        reorder=reorder_run,
        efficiency=efficiency,
        warnings=warnings,
    )
    report.findings = where_time_goes(report) + [
        f"Step {index} carries {extra:.2f} s of extra work in every run (an evaluation, a sample, a checkpoint or "
        "a logging burst): each trial's step is compared with the baseline's same step, so it never aborts one."
        for index, extra in abort.periodic_steps([[*r.warmup_times, *r.step_times] for r in runs]).items()]
    return report


def _phase_split(runs: list[TrialResult]) -> PhaseSplit:
    step = statistics.fmean(statistics.fmean(r.step_times) for r in runs)
    names = [p for p in PHASES if any(p in r.phases for r in runs)]
    phases = {p: statistics.fmean(r.phases.get(p, 0.0) for r in runs) for p in names}
    total = sum(phases.values())
    coverage = total / step
    return PhaseSplit(step_s=step, phases=phases, other_s=step - total, coverage=coverage,
                      covered=abs(1 - coverage) <= PHASE_TOLERANCE)


def _efficiency(
    contract: Contract, runs: list[TrialResult], step_s: float, peak: PeakFlops | None, devices: int,
    warnings: list[str],
) -> Efficiency:
    """Throughput and MFU. FLOPs per step come from FlopCounterMode (the launcher counts them on a
    warm-up step, for any model); 6N + 12·L·H·Q·T from the probe's model facts is the cross-check,
    and the source of MFU only when there is no count."""
    tokens = contract.workload.tokens_per_step
    tokens_per_s = tokens / step_s
    samples = contract.workload.samples_per_step or runs[0].samples_per_step
    startups = [r.startup_s for r in runs if r.startup_s is not None]
    projected = (statistics.median(startups) if startups else 0.0) + contract.workload.planned_steps * step_s
    facts = runs[0].model_facts
    fpt = flops_6n = None
    if facts:
        try:
            fpt = flops_per_token_from_facts(facts)
            flops_6n = fpt * tokens if tokens else None
        except ValueError as err:
            warnings.append(f"no 6N+12LHQT cross-check: {err}")
    counted = [r.flops_per_step for r in runs if r.flops_per_step]
    if counted:
        flops_per_step, source = counted[0], "FlopCounterMode"
        if flops_6n and not 0.7 <= flops_per_step / flops_6n <= 1.3:
            warnings.append(f"FlopCounterMode counted {flops_per_step:.3g} FLOPs per step, 6N+12LHQT from the "
                            f"probe's model facts gives {flops_6n:.3g}: MFU uses the count")
    elif flops_6n:
        flops_per_step, source = flops_6n, "6N+12LHQT"
    else:
        flops_per_step, source = None, ""
        warnings.append("no FLOPs per step: the launcher counts them on warm-up step 1 (the contract needs two "
                        "warm-up steps) and the script does not report its model (probe.model(...)): no MFU")
    achieved = utilization = None
    if flops_per_step:
        achieved = flops_per_step / step_s
        if peak is not None:
            utilization = achieved / (peak.value * devices)
            if utilization > 1:
                warnings.append(f"the job did {utilization:.0%} of the measured peak ({peak.source}): the peak "
                                "was measured too low, probably while the machine was busy; MFU reads 100%")
                utilization = 1.0
    return Efficiency(tokens_per_step=tokens, tokens_per_s=tokens_per_s, projected_job_s=projected,
                      devices=devices, flops_per_token=fpt, achieved_flops=achieved, peak=peak, mfu=utilization,
                      samples_per_step=samples, samples_per_s=samples / step_s if samples else None,
                      flops_per_step=flops_per_step, mfu_source=source if utilization is not None else "",
                      flops_per_step_6n=flops_6n)
