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
"""

from __future__ import annotations

import math
import shutil
import statistics
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass, replace
from datetime import datetime, timezone
from enum import StrEnum
from pathlib import Path

import torch

from infrarsi import batch, noise
from infrarsi.background import busy_limit
from infrarsi.byte_units import GIB
from infrarsi.contract import Contract, ContractError, KnobValue, require_intact, save_contract
from infrarsi.datasheet import normalize_dtype
from infrarsi.events import Event, EventSink, ignore
from infrarsi.experiment import quiet
from infrarsi.experiment.trial_runner import TrialArgs, TrialRunner
from infrarsi.flops import flops_per_token_from_facts
from infrarsi.hardware import fingerprint, machine_peak, peak_flops, precision_peaks
from infrarsi.knobs.llm_roles import Claim, load_claims, save_claims
from infrarsi.probe import PHASES
from infrarsi.records.doctor import (
    BaselineRun,
    DoctorError,
    DoctorReport,
    Efficiency,
    MemoryUse,
    PhaseSplit,
    ReorderRun,
    save_doctor,
)
from infrarsi.records.files import doctor_logs_dir
from infrarsi.records.hardware import HardwareFingerprint, PeakFlops
from infrarsi.runner import abort, accounting, interference
from infrarsi.runner.sandbox import bwrap_problem, mode_words
from infrarsi.stages.claims import check_claims, unlocked
from infrarsi.trials import Candidate, TrialResult, TrialStatus
from infrarsi.whole_process import Lengths

PHASE_TOLERANCE = 0.10
"""The probe's phases must cover the step time within this fraction for the split to be trusted."""


# --- the stage -----------------------------------------------------------------------------------


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
    runner = TrialRunner(repo=repo, contract=contract, stage="doctor", sandbox=sandbox, on_event=on_event,
                         show_trials=True, quiet=quiet.QuietWaiter(busy_limit(len(interference.job_cores())),
                                                                   wait_for_quiet or None, "doctor", on_event))
    idle, waited = _machine_background(runner.quiet, on_event)

    runs: list[TrialResult] = []
    length_warning = ""
    for i in range(repeats):
        steps = None
        if i == repeats - 1:
            # The last baseline run is verification's long run: its lengths from the runs before it.
            contract = _measured_contract(contract, runs, on_event)
            lengths = _verification_lengths(contract, runs)
            steps = lengths.long
        on_event(Event("doctor", "report", f"baseline run {i + 1} of {repeats}", i, total))
        result = _baseline_run(runner, i, steps, log_root)
        if steps is not None and steps > contract.workload.total_steps and result.status is TrialStatus.CRASH:
            length_warning = (f"the baseline did not run the {steps} steps chosen for verification ({result.detail[-200:]}); "
                              f"verification runs the contract's {contract.workload.total_steps}, and its intervals are wider")
            lengths = Lengths(short=lengths.short, long=contract.workload.total_steps, planned=lengths.planned)
            result = _baseline_run(runner, i, lengths.long, log_root)
        runs.append(_checked_baseline(i, result, on_event))
    background = interference.measured_background([r.interference for r in runs], idle, waited)
    contract = _measured_contract(contract, runs, on_event)
    # Every later run is judged against the normal the baseline runs measured, and rerun when disturbed.
    runner = replace(runner, contract=contract)
    runner.judge_by(background)
    on_event(Event("doctor", "report", f"the baseline for {lengths.short} steps (verification's reference)",
                   repeats, total))
    short = runner.run(TrialArgs(candidate=Candidate(), name=f"the baseline for {lengths.short} steps",
                                 check_loss=False, steps=lengths.short,
                                 log_dir=log_root / f"baseline-{lengths.short}-steps")).result
    if not _ran(short):
        raise DoctorError(f"the baseline run of {lengths.short} steps ended {short.status.value}: {short.detail}\n"
                          f"log: {short.log_path}")
    checksums = {n: c for n, c in ((contract.workload.total_steps, runs[0].param_checksum),
                                   (lengths.long, runs[-1].param_checksum),
                                   (lengths.short, short.param_checksum)) if c is not None}

    reorder_knobs = _reorder_knobs(contract)
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
    peak, devices, peak_warning = _peak(contract, hardware)

    try:
        report = summarize(contract, runs, reorder_knobs, reorder_result, hardware, peak, devices)
    except ValueError as err:  # a baseline whose losses cannot serve as the reference
        raise DoctorError(f"{err}\nlog: {runs[0].log_path}") from None
    report.checksums = checksums
    report.reassociation_drift = _drift(reorder_result, checksums.get(reorder_steps), reorder_steps)
    report.warnings += [length_warning] if length_warning else []
    report.verification_steps = [lengths.short, lengths.long]
    report.reference_pair = [short.to_dict(), runs[-1].to_dict()] if short.ok and runs[-1].process_s else []
    report.round_cv = _round_cv(lengths, runs)
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
    updated = _judge_claims(replace(runner, contract=updated), runs, report, log_root)
    save_contract(updated, repo)
    report.contract_hash = updated.digest()
    report.wall_s = time.perf_counter() - started
    report.launches = _launches(log_root)
    report.sandbox = mode_words(sandbox)
    save_doctor(report, repo)
    on_event(Event("doctor", "end", f"noise floor {report.noise.min_speedup:.3f}×", total, total))
    return report


def _verification_lengths(contract: Contract, runs: list[TrialResult]) -> Lengths:
    """Verification's two lengths, from the baseline runs' median step, start-up and the spread of
    their whole-process times (``Lengths.of``), believed as doctor's report will believe them: as
    many degrees of freedom as its baseline runs, this last one included, less one."""
    steps = [s for r in runs for s in r.step_times]
    startups = [r.startup_s for r in runs if r.startup_s is not None]
    return Lengths.of(contract.workload, step_s=statistics.median(steps) if steps else None,
                      startup_s=statistics.median(startups) if startups else None, process_sd_s=_process_sd(runs),
                      step_cv=_step_cv(runs), policy=contract.verify_policy, prior_df=len(runs))


def _measured_contract(contract: Contract, runs: list[TrialResult], on_event: EventSink) -> Contract:
    """The contract with what the baseline runs so far measured: the workload, the real length,
    whether evaluations are reached."""
    contract = with_measured_workload(contract, runs)
    contract = with_measured_length(contract, runs, on_event)
    return with_evaluations_measured(contract, runs, on_event)


def _baseline_run(runner: TrialRunner, i: int, steps: int | None, log_root: Path) -> TrialResult:
    """One baseline run, never judged disturbed (the baseline runs measure the machine's normal)."""
    return runner.once(TrialArgs(candidate=Candidate(), check_loss=False, steps=steps,
                                 log_dir=log_root / f"baseline-{i + 1}"))


def _checked_baseline(i: int, result: TrialResult, on_event: EventSink) -> TrialResult:
    """``result`` when it can serve as a baseline run (ok, two measured steps); DoctorError if not."""
    step_s = result.step_time
    if not result.ok or step_s is None or len(result.step_times) < 2:
        raise DoctorError(
            f"baseline run {i + 1} ended {result.status.value}"
            f"{' with fewer than 2 measured steps' if result.ok else ''}: {result.detail}\n"
            f"log: {result.log_path}"
        )
    on_event(Event("doctor", "log", f"baseline run {i + 1}: median step {step_s * 1000:.1f} ms, "
                                    f"peak {(result.peak_bytes or 0) / GIB:.2f} GiB, {result.wall_s:.1f} s"))
    return result


def _round_cv(lengths: Lengths, runs: list[TrialResult]) -> float | None:
    """The spread verification should expect of one round's job time (``Lengths.round_cv``)."""
    startups = [r.startup_s for r in runs if r.startup_s is not None]
    steps = [s for r in runs for s in r.step_times]
    if not steps or not startups:
        return None
    return lengths.round_cv(step_s=statistics.median(steps), startup_s=statistics.median(startups),
                            process_sd_s=_process_sd(runs), step_cv=_step_cv(runs))


def _step_cv(runs: list[TrialResult]) -> float:
    """How far the baseline runs' paces differ, process to process: their median steps' CV."""
    medians = [statistics.median(r.step_times) for r in runs if r.step_times]
    return noise.cv(medians) if medians else 0.0


def _process_sd(runs: list[TrialResult]) -> float | None:
    """The spread of a whole process's start-up over the warm baseline runs (None: fewer than two),
    the steps' own spread being ``_step_cv``'s: the first launch reads the interpreter, the
    libraries and the data from disk for every later one (the README job's first doctor run
    started 0.6 s later than its second, its search trials within 0.2 s of each other), and
    verification runs warm processes only."""
    startups = [r.startup_s for r in runs[1:] if r.startup_s is not None]
    return statistics.stdev(startups) if len(startups) >= 2 else None


def _launches(log_root: Path) -> int:
    """The processes this doctor launched: each run and rerun leaves its own log directory there."""
    return sum(1 for p in log_root.iterdir() if p.is_dir()) if log_root.is_dir() else 0


def _median_step_s(run: TrialResult) -> float:
    """A baseline run's median step (``TrialResult.step_time``): doctor keeps only runs with measured steps."""
    step_s = run.step_time
    if step_s is None:
        raise DoctorError(f"a baseline run has no measured steps: log {run.log_path}")
    return step_s


def _ran(result: TrialResult) -> bool:
    """Whether a run after the baseline's gave its losses and parameters: ok, or still disturbed
    after its reruns. Doctor bounds none of them in time, so a disturbed one only ran slower, and
    how fast it ran is not what it is for."""
    return result.ok or result.status is TrialStatus.DISTURBED


def _drift(reorder: TrialResult | None, baseline: list[float] | None, steps: int) -> dict[int, float]:
    """How far the reassociation run's parameters ended from the baseline's of the same length."""
    if reorder is None or not _ran(reorder) or not reorder.param_checksum or not baseline:
        return {}
    return {steps: accounting.checksum_drift(reorder.param_checksum, baseline)}


def _judge_claims(runner: TrialRunner, runs: list[TrialResult], report: DoctorReport, log_root: Path) -> Contract:
    """The model's role claims init kept, each judged by a trial (stages/claims.py); the contract
    with the confirmed ones unlocked."""
    repo, contract, on_event = runner.repo, runner.contract, runner.on_event
    kept, problem = load_claims(repo)
    if problem:
        report.warnings.append(problem)
    if not any(c.status == "unconfirmed" for c in kept):
        report.claims = [asdict(c) for c in kept]
        return contract
    baseline = sorted(runs, key=_median_step_s)[len(runs) // 2]

    def run_probe(claim: Claim, values: dict) -> TrialResult:
        on_event(Event("doctor", "log", f"testing the model's claim that {claim.name} is {claim.role}: "
                                        + ", ".join(f"{k}={v}" for k, v in values.items())))
        return runner.run(TrialArgs(candidate=Candidate(knobs=values), name=f"the trial of the claim on {claim.name}",
                                    check_loss=False, log_dir=log_root / f"claim-{claim.name}")).result

    judged = check_claims(contract, kept, baseline, report.losses.tolerance, report.noise.min_speedup - 1, run_probe)
    save_claims(repo, judged)
    report.claims = [asdict(c) for c in judged]
    for c in judged:
        on_event(Event("doctor", "log", f"claim {c.name} is {c.role}: {c.status}, {c.why}"))
    return unlocked(contract, judged)


def _machine_background(waiter: quiet.QuietWaiter, on_event: EventSink) -> tuple[float, float]:
    """Other processes' use of the job's cores before any baseline run, after waiting for quiet
    (below ``waiter``'s limit, ``busy_limit``) when asked; (cores used, seconds waited)."""
    cores = interference.job_cores()
    idle = interference.idle_load(cores=cores)
    if idle <= waiter.limit_cores:
        return idle, 0.0
    on_event(Event("doctor", "log", f"the machine is busy: other processes use {idle:.2f} of the job's "
                                    f"{len(cores)} cores (quiet is at most {waiter.limit_cores:.2f})"))
    done = waiter.wait("before the baseline")
    return (done.load_cores, done.waited_s) if done is not None else (idle, 0.0)


def with_measured_workload(contract: Contract, runs: list[TrialResult]) -> Contract:
    """Fill in what init could not derive (tokens per step, sequence length, global batch: 0 in
    the contract) from what the launcher counted in the baseline runs, and the model's shape from
    the facts the script gave the probe (``with_model_shape``). A workload without tokens (images,
    audio) is held to its samples per step instead."""
    contract = with_model_shape(contract, runs[0].model_facts if runs else {})
    w = contract.workload
    if w.tokens_per_step and w.seq_len and w.global_batch:
        return contract
    tokens = {r.tokens_per_step for r in runs}
    samples = {r.samples_per_step for r in runs}
    sequences = next(iter(samples)) if len(samples) == 1 and None not in samples else 0
    if not w.tokens_per_step and tokens == {None} and sequences:
        return replace(contract, workload=replace(w, samples_per_step=sequences,
                                                  global_batch=w.global_batch or sequences))
    counted = {t for t in tokens if t is not None}
    if len(tokens) != 1 or not counted:
        raise DoctorError(
            "the contract does not know the tokens per step and the launcher did not count them "
            f"consistently in the baseline runs (tokens {sorted(tokens, key=str)}, samples "
            f"{sorted(samples, key=str)}): the first module the job calls must take the batch as its "
            "first tensor argument"
        )
    tokens_per_step = w.tokens_per_step or counted.pop()
    # Integer inputs of shape (sequences, length): the sequence length is their ratio.
    seq_len = w.seq_len or int(runs[0].model_facts.get("seq_len", 0)) or (
        tokens_per_step // sequences if sequences and tokens_per_step % sequences == 0 else 0)
    if not seq_len:
        raise DoctorError("the contract does not know the sequence length and the launcher could not tell it: "
                          "call probe.model(..., seq_len=…) in the script")
    global_batch = w.global_batch or sequences or tokens_per_step // seq_len
    return replace(contract, workload=replace(w, tokens_per_step=tokens_per_step, seq_len=seq_len,
                                              global_batch=global_batch))


def with_model_shape(contract: Contract, facts: Mapping[str, int]) -> Contract:
    """The hidden size, heads, layers and parameters the script's ``probe.model`` reported, over
    init's reading of the knobs' names (``catalog.shape_of``): the priors price selective
    recomputation (``infrarsi.priors.attention_core``) and a GPU's activations
    (``infrarsi.priors.activation_bytes``) from them."""
    w = contract.workload
    heads, head_dim = int(facts.get("heads", 0)), int(facts.get("head_dim", 0))
    layers, params = int(facts.get("layers", 0)), int(facts.get("params", 0))
    known = heads > 0 and head_dim > 0
    return replace(contract, workload=replace(
        w, hidden=heads * head_dim if known else w.hidden, heads=heads if known else w.heads,
        layers=layers if layers > 0 else w.layers, params=params if params > 0 else w.params))


def with_measured_length(contract: Contract, runs: list[TrialResult], on_event: EventSink = ignore) -> Contract:
    """An epoch-counted job's length: its epochs x the steps an epoch the launcher counted (the
    training loader's length over the batches a step draws), the same in every baseline run."""
    w = contract.workload
    if not w.epochs:
        return contract
    counted = {r.steps_per_epoch for r in runs}
    alike = {n for n in counted if n is not None}
    if len(counted) != 1 or not alike:
        on_event(Event("doctor", "log", f"the job runs {w.epochs} epochs, but the steps an epoch were not counted "
                                        f"alike in the baseline runs ({sorted(counted, key=str)}): it stays "
                                        f"{w.planned_steps} steps"))
        return contract
    per_epoch = alike.pop()
    planned = w.epochs * per_epoch
    said = f"{w.planned_from} x {per_epoch} steps an epoch (the training loader's length, counted by doctor)"
    on_event(Event("doctor", "log", f"the real job: {planned} steps = {said}"))
    return replace(contract, workload=replace(w, planned_steps=planned, planned_from=said, epochs=0))


def with_evaluations_measured(contract: Contract, runs: list[TrialResult], on_event: EventSink = ignore) -> Contract:
    """An evaluation's batch is searched only where a trial's measured steps reach an evaluation:
    with no measured step of the baseline runs carrying periodic work, what it changes (the
    evaluation's time and its memory) is never measured, and a promotion could carry an evaluation
    batch no run ever held. Warm-up steps do not count: their extra work is mostly warming up."""
    evals = [k.name for k in contract.tunable if k.role == "eval_batch"]
    if not evals or abort.periodic_steps([r.step_times for r in runs]):
        return contract
    note = (f"{', '.join(evals)}: the batch of an evaluation that no trial's measured steps reach (none of the "
            "baseline runs' carried periodic work), so its time and memory are never measured: not searched")
    on_event(Event("doctor", "log", note))
    w = contract.workload
    return replace(contract, knobs=[replace(k, tunable=False) if k.name in evals else k for k in contract.knobs],
                   workload=replace(w, notes=[*w.notes, note]))


def _reorder_knobs(contract: Contract) -> dict[str, KnobValue]:
    """Settings that only reorder the job's float sums: another micro-batch size that splits the same
    global batch (and the accumulation that keeps it), nearest the default and, between equally near
    ones, the smaller (it needs less memory, so it fits whatever budget the default fits); else, on a
    CPU, another thread count (intra-op reductions split another way). Empty when there is neither."""
    micro = [k for k in contract.by_role("micro_batch") if k.type == "int"]
    if not micro:
        return _other_thread_count(contract)
    knob = micro[0]
    default = int(knob.default)
    accum = [k for k in contract.by_role("grad_accum") if not k.patch]
    ranks = int(next((k.default for k in contract.by_role("nproc_per_node")), 1)) or 1
    per_rank = batch.per_rank(contract.workload.global_batch, ranks)
    choices = sorted(
        (int(v) for v in knob.domain if int(v) != default and int(v) > 0 and batch.divides(per_rank, int(v))),
        key=lambda v: (abs(math.log(v / default)), v),
    )
    if not choices:
        return _other_thread_count(contract)
    values: dict[str, KnobValue] = {knob.name: choices[0]}
    if accum:
        values[accum[0].name] = batch.accumulation(contract.workload.global_batch, choices[0], ranks,
                                                   bool(accum[0].over_ranks))
    return values


def _other_thread_count(contract: Contract) -> dict[str, KnobValue]:
    """The fewest threads other than the default (0 is torch's own count, never fewer than one)."""
    threads = [k for k in contract.by_role("threads") if k.type == "int" and k.tunable]
    if contract.memory.device != "cpu" or not threads:
        return {}
    knob = threads[0]
    others = sorted(int(v) for v in knob.domain if int(v) > 0 and int(v) != int(knob.default))
    return {knob.name: others[0]} if others else {}


def _knob_default(contract: Contract, role: str) -> KnobValue | None:
    knobs = contract.by_role(role)
    return knobs[0].default if knobs else None


def _peak(contract: Contract, hardware: HardwareFingerprint) -> tuple[PeakFlops | None, int, str]:
    """The peak FLOP/s of what the job runs on, how many devices it spans, and a warning if any."""
    device = contract.memory.device
    ranks = int(_knob_default(contract, "nproc_per_node") or 1)
    raw_dtype = _knob_default(contract, "dtype") or "fp32"
    try:
        dtype = normalize_dtype(str(raw_dtype))
    except ValueError:
        return None, 1, f"the dtype knob's default {raw_dtype!r} is not one doctor knows: no MFU"
    if device == "cuda":
        if not hardware.gpu_count:
            return None, ranks, "the contract runs on CUDA but this machine has no visible GPU: no MFU"
        return peak_flops("cuda", dtype, hardware=hardware), ranks, ""
    # On a CPU every rank's threads share one pool of cores; the job's peak is the cores it uses.
    threads = int(_knob_default(contract, "threads") or 0) or torch.get_num_threads()
    return peak_flops("cpu", dtype, threads=threads * ranks, hardware=hardware, remeasure=True), 1, ""


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

    reorder_losses = [reorder.losses] if reorder is not None and _ran(reorder) else []
    losses = noise.loss_tolerance([r.losses for r in runs], contract.loss.compare_steps, reorder_losses)
    reorder_run = None
    if reorder_knobs and reorder is not None:
        k = min(contract.loss.compare_steps, len(reorder.losses))
        dev = max((abs(a - b) for a, b in zip(reorder.losses[:k], losses.reference)), default=None) \
            if _ran(reorder) else None
        reorder_run = ReorderRun(knobs=reorder_knobs, status=reorder.status.value, max_deviation=dev,
                                 detail=reorder.detail)
        if not _ran(reorder):
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
        created=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        contract_hash=contract.digest(),
        hardware=hardware,
        runs=[
            BaselineRun(status=r.status.value, step_times=list(r.step_times), median_step_s=_median_step_s(r),
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


# What a large share of a phase usually points at, for the summary.
_PHASE_HINTS = {
    "data": (0.10, "batches are built on the training thread; prefetching or loader workers can hide it"),
    "optimizer": (0.15, "a foreach or fused optimizer implementation usually shortens it"),
    "communication": (0.10, "gradient all-reduce is exposed; bucket sizes, overlap and no_sync under "
                            "accumulation are the levers"),
    "other": (0.10, "time outside every probe phase: logging, host-device syncs, Python between phases"),
}


def where_time_goes(report: DoctorReport) -> list[str]:
    """Where the time goes, as sentences: the split, the phases that stand out, compute efficiency."""
    out = []
    shares = report.phases.shares() if report.phases.phases else {}
    if shares:
        top = list(shares.items())[:3]
        out.append("A step is " + ", ".join(f"{name} {share:.0%}" for name, share in top)
                   + f" of {report.phases.step_s * 1000:.0f} ms.")
        compute = sum(shares.get(p, 0.0) for p in ("forward", "backward"))
        if compute:
            out.append(f"Forward and backward take {compute:.0%} of the step.")
        for name, (threshold, hint) in _PHASE_HINTS.items():
            if shares.get(name, 0.0) >= threshold:
                out.append(f"{name.capitalize()} takes {shares[name]:.0%}: {hint}.")
    eff = report.efficiency
    if eff.mfu is not None and eff.peak is not None:
        if eff.mfu >= 0.5:
            out.append(f"MFU ({eff.mfu_source} FLOPs) is {eff.mfu:.1%} of the {eff.peak.dtype} peak: the matmuls "
                       f"already run near what {eff.peak.dtype} can do here; gains must come from doing less, "
                       "overlapping more, or a faster precision.")
        else:
            out.append(f"MFU ({eff.mfu_source} FLOPs) is {eff.mfu:.1%} of the {eff.peak.dtype} peak: most of "
                       "the hardware's compute goes unused, so there is room in launch settings and kernels.")
    return out


FASTER_PRECISION = 1.5
"""How much more a second the machine's fastest precision must do than the job's for doctor to say so."""


def precision_headroom(eff: Efficiency) -> list[str]:
    """The machine's fastest precision against the job's, when it does much more a second: an fp32
    job at 50% of an H200's fp32 peak uses 3% of its bf16 tensor cores (docs/benchmarks.md)."""
    fast, own = eff.machine_peak, eff.peak
    if eff.mfu is None or fast is None or own is None or fast.dtype == own.dtype \
            or fast.value < FASTER_PRECISION * own.value:
        return []
    return [f"The job's matmuls use {eff.mfu * own.value / fast.value:.1%} of the machine's "
            f"{fast.dtype} peak ({fast.value / 1e12:.3g} TFLOP/s a device): {fast.dtype} does "
            f"{fast.value / own.value:.1f}x the {own.dtype} work a second here, the largest headroom there is."]
