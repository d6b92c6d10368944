"""Doctor's test of the model's role claims (knobs/llm_roles.py): believed only when a trial agrees.

Init asks the configured model about the knobs the rules leave ``unknown`` and keeps its claims,
locked. For each claim of a speed role, doctor runs one trial with the knob moved to another value
of the claimed role's domain (a claimed micro-batch moves with the accumulation knob, so the global
batch holds) and compares it with a baseline run (:func:`judge`). A confirmed knob is
unlocked in the contract with the claimed role and that role's domain; a refuted one stays locked,
and so does one with no other value to try. Every verdict is kept in ``.infrarsi/claims.json``
and in doctor's report.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from dataclasses import replace

from infrarsi import batch
from infrarsi.contract import Contract, Knob, KnobValue
from infrarsi.knobs.catalog import domain
from infrarsi.knobs.llm_roles import Claim
from infrarsi.knobs.raw import RawKnob
from infrarsi.trials import TrialResult, TrialStatus

MEMORY_MOVES = 0.05
"""A peak-memory change below this share is noise, not evidence of a micro-batch."""
CPU_MOVES = 0.2
"""A change of the job's CPU use (cores' worth) below this share is not evidence of a thread count."""
TIME_MOVES = 0.05
"""The least step-time change that is evidence of a speed role, whatever doctor's floor."""

RunProbe = Callable[[Claim, dict[str, KnobValue]], TrialResult]
"""Runs the baseline with these knob values changed (doctor's trial, judged against the normal the
baseline runs measured and rerun while disturbed: experiment/trial_runner.py)."""


def _moved(a: float | None, b: float | None, share: float) -> bool:
    return a is not None and b is not None and b > 0 and abs(a / b - 1) > share


def _same_work(base: TrialResult, probe: TrialResult) -> bool:
    if base.tokens_per_step is not None or probe.tokens_per_step is not None:
        return base.tokens_per_step == probe.tokens_per_step
    return base.samples_per_step == probe.samples_per_step


def judge(claim: Claim, baseline: TrialResult, probe: TrialResult, loss_tolerance: float,
          time_moves: float = TIME_MOVES) -> Claim:
    """``claim`` confirmed or refuted by a trial with the claimed knob changed (``probe``);
    ``time_moves``: the step-time change that is more than noise (doctor's floor, at least TIME_MOVES)."""
    if claim.status != "unconfirmed":
        return claim

    def verdict(confirmed: bool | None, why: str) -> Claim:
        status = "unconfirmed" if confirmed is None else "confirmed" if confirmed else "refuted"
        return replace(claim, status=status, why=why)

    if not baseline.ok:
        return verdict(None, "the baseline did not finish")
    if probe.status is TrialStatus.DISTURBED:
        return verdict(None, f"the trial with it changed was disturbed by other processes: {probe.detail[:200]}")
    if not probe.ok:
        return verdict(False, f"the trial with it changed ended {probe.status.value}: {probe.detail[:200]}")
    if not _same_work(baseline, probe):
        return verdict(False, f"the work per step changed ({baseline.tokens_per_step or baseline.samples_per_step} -> "
                              f"{probe.tokens_per_step or probe.samples_per_step}): it is the workload")
    if claim.role == "micro_batch":
        if _moved(probe.peak_bytes, baseline.peak_bytes, MEMORY_MOVES):
            return verdict(True, "the tokens per step held and peak memory moved")
        return verdict(False, "peak memory did not move")
    pairs = list(zip(baseline.losses, probe.losses, strict=False))
    if not pairs or any(not math.isfinite(b) or abs(a - b) > loss_tolerance * max(1.0, abs(b)) for b, a in pairs):
        return verdict(False, "the loss trajectory changed")
    cpu = [(r.interference or {}).get("mean_job_cores") for r in (baseline, probe)]
    if claim.role == "threads" and None not in cpu:
        if _moved(cpu[1], cpu[0], CPU_MOVES):
            return verdict(True, f"the loss held and the job's CPU use moved ({cpu[0]:.2f} -> {cpu[1]:.2f} cores)")
        return verdict(False, f"the job's CPU use did not move ({cpu[0]:.2f} -> {cpu[1]:.2f} cores)")
    if not _moved(probe.step_time, baseline.step_time, max(time_moves, TIME_MOVES)):
        return verdict(False, "the step time did not move")
    return verdict(True, "the loss held and the step time moved")


def claimed_domain(contract: Contract, knob: Knob, role: str) -> list[KnobValue]:
    """The values the search could try were ``knob`` what the claim says (init's rule for that role)."""
    raw = RawKnob(name=knob.name, type=knob.type, default=knob.default, help=knob.help, flag=knob.flag,
                  flag_style=knob.flag_style, source=knob.source)
    values, _ = domain(role, raw, global_batch=contract.workload.global_batch or None, cpu_count=os.cpu_count() or 1)
    return values


def probe_values(contract: Contract, claim: Claim) -> dict[str, KnobValue] | str:
    """The knob values of the trial that tests ``claim``, or why there is none."""
    knob = contract.knob(claim.name)
    others = [v for v in claimed_domain(contract, knob, claim.role) if v != knob.default]
    if not others:
        return f"a {claim.role} knob with default {knob.default!r} has no other value to try"
    if claim.role != "micro_batch":
        return {knob.name: others[0]}
    # Halve the micro-batch and double the accumulation, so the tokens per step hold if the claim is right.
    smaller = [v for v in others if isinstance(v, int) and isinstance(knob.default, int) and v < knob.default]
    value = max(smaller) if smaller else others[0]
    accum = [k for k in contract.by_role("grad_accum") if not k.patch]  # the script's own accumulation
    steps = accum[0].default if accum else None
    if not isinstance(steps, int) or not isinstance(value, int) or not isinstance(knob.default, int):
        return {knob.name: value}
    total = batch.global_batch(knob.default, steps)
    if not batch.divides(total, value):
        return {knob.name: value}
    return {knob.name: value, accum[0].name: batch.accumulation(total, value)}


def unlocked(contract: Contract, claims: list[Claim]) -> Contract:
    """``contract`` with every confirmed claim's knob given its role and tunable over that role's domain."""
    confirmed = {c.name: c.role for c in claims if c.status == "confirmed" and c.role not in ("workload", "unknown")}
    if not confirmed:
        return contract
    knobs = []
    for k in contract.knobs:
        if k.name in confirmed:
            values = claimed_domain(contract, k, confirmed[k.name])
            k = replace(k, role=confirmed[k.name], domain=values, tunable=len(values) >= 2)
        knobs.append(k)
    return replace(contract, knobs=knobs)


def check_claims(contract: Contract, claims: list[Claim], baseline: TrialResult, loss_tolerance: float,
                 time_noise: float, run_probe: RunProbe) -> list[Claim]:
    """Each unconfirmed claim judged by its own trial against ``baseline`` (a step-time change
    within ``time_noise``, a share, says nothing)."""
    judged = []
    for claim in claims:
        if claim.status != "unconfirmed" or claim.name not in {k.name for k in contract.knobs}:
            judged.append(claim)
            continue
        values = probe_values(contract, claim)
        if isinstance(values, str):
            judged.append(replace(claim, why=values))
            continue
        verdict = judge(claim, baseline, run_probe(claim, values), loss_tolerance, time_noise)
        setting = ", ".join(f"{k}={v}" for k, v in values.items())
        judged.append(replace(verdict, why=f"{verdict.why} (trial with {setting})"))
    return judged
