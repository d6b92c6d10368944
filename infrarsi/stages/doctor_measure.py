"""What doctor runs, and what it reads off each run.

The machine's background before the baseline, the baseline runs and the check that each can serve
as one, verification's lengths and the spread one of its rounds should show, the knobs of the
reassociation run and how far its parameters drift, the peak FLOP/s of what the job runs on, and
the trials of the model's role claims (``stages/claims.py`` judges them).
"""

from __future__ import annotations

import math
import statistics
from dataclasses import asdict
from pathlib import Path

import torch

from infrarsi import batch, noise
from infrarsi.byte_units import GIB
from infrarsi.contract import Contract, KnobValue
from infrarsi.datasheet import normalize_dtype
from infrarsi.events import Event, EventSink
from infrarsi.experiment import quiet
from infrarsi.experiment.trial_runner import TrialArgs, TrialRunner
from infrarsi.hardware import peak_flops
from infrarsi.knobs.llm_roles import Claim, load_claims, save_claims
from infrarsi.records.doctor import DoctorError, DoctorReport
from infrarsi.records.hardware import HardwareFingerprint, PeakFlops
from infrarsi.runner import accounting, interference
from infrarsi.stages.claims import check_claims, unlocked
from infrarsi.trials import Candidate, TrialResult, TrialStatus
from infrarsi.whole_process import Lengths


def verification_lengths(contract: Contract, runs: list[TrialResult]) -> Lengths:
    """Verification's two lengths, from the baseline runs' median step, start-up and the spread of
    their whole-process times (``Lengths.of``), believed as doctor's report will believe them: as
    many degrees of freedom as its baseline runs, this last one included, less one."""
    steps = [s for r in runs for s in r.step_times]
    startups = [r.startup_s for r in runs if r.startup_s is not None]
    return Lengths.of(contract.workload, step_s=statistics.median(steps) if steps else None,
                      startup_s=statistics.median(startups) if startups else None, process_sd_s=_process_sd(runs),
                      step_cv=_step_cv(runs), policy=contract.verify_policy, prior_df=len(runs))


def baseline_run(runner: TrialRunner, i: int, steps: int | None, log_root: Path) -> TrialResult:
    """One baseline run, never judged disturbed (the baseline runs measure the machine's normal)."""
    return runner.once(TrialArgs(candidate=Candidate(), check_loss=False, steps=steps,
                                 log_dir=log_root / f"baseline-{i + 1}"))


def checked_baseline(i: int, result: TrialResult, on_event: EventSink) -> TrialResult:
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


def round_cv(lengths: Lengths, runs: list[TrialResult]) -> float | None:
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


def launches(log_root: Path) -> int:
    """The processes this doctor launched: each run and rerun leaves its own log directory there."""
    return sum(1 for p in log_root.iterdir() if p.is_dir()) if log_root.is_dir() else 0


def median_step_s(run: TrialResult) -> float:
    """A baseline run's median step (``TrialResult.step_time``): doctor keeps only runs with measured steps."""
    step_s = run.step_time
    if step_s is None:
        raise DoctorError(f"a baseline run has no measured steps: log {run.log_path}")
    return step_s


def gave_results(result: TrialResult) -> bool:
    """Whether a run after the baseline's gave its losses and parameters: ok, or still disturbed
    after its reruns. Doctor bounds none of them in time, so a disturbed one only ran slower, and
    how fast it ran is not what it is for."""
    return result.ok or result.status is TrialStatus.DISTURBED


def checksum_drift_at(reorder: TrialResult | None, baseline: list[float] | None, steps: int) -> dict[int, float]:
    """How far the reassociation run's parameters ended from the baseline's of the same length."""
    if reorder is None or not gave_results(reorder) or not reorder.param_checksum or not baseline:
        return {}
    return {steps: accounting.checksum_drift(reorder.param_checksum, baseline)}


def judge_claims(runner: TrialRunner, runs: list[TrialResult], report: DoctorReport, log_root: Path) -> Contract:
    """The model's role claims init kept, each judged by a trial (stages/claims.py); the contract
    with the confirmed ones unlocked."""
    repo, contract, on_event = runner.repo, runner.contract, runner.on_event
    kept, problem = load_claims(repo)
    if problem:
        report.warnings.append(problem)
    if not any(c.status == "unconfirmed" for c in kept):
        report.claims = [asdict(c) for c in kept]
        return contract
    baseline = sorted(runs, key=median_step_s)[len(runs) // 2]

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


def machine_background(waiter: quiet.QuietWaiter, on_event: EventSink) -> tuple[float, float]:
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


def reordering_settings(contract: Contract) -> dict[str, KnobValue]:
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


def peak_flops_of(contract: Contract, hardware: HardwareFingerprint) -> tuple[PeakFlops | None, int, str]:
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
