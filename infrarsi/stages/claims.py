"""Doctor's test of the model's role claims (knobs/llm_roles.py): believed only when a trial agrees.

Init asks the configured model about the knobs the rules leave ``unknown`` and keeps its claims,
locked. For each claim of a speed role, doctor runs one trial with the knob moved to another value
of the claimed role's domain (a claimed micro-batch moves with the accumulation knob, so the global
batch holds) and compares it with a baseline run (``llm_roles.judge``). A confirmed knob is
unlocked in the contract with the claimed role and that role's domain; a refuted one stays locked,
and so does one with no other value to try. Every verdict is kept in ``.infrarsi/claims.json``
and in doctor's report.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import replace

from infrarsi import batch
from infrarsi.contract import Contract, Knob, KnobValue
from infrarsi.knobs.catalog import domain
from infrarsi.knobs.discover import RawKnob
from infrarsi.knobs.llm_roles import Claim, judge
from infrarsi.runner.result import TrialResult

RunProbe = Callable[[Claim, dict[str, KnobValue]], TrialResult]
"""Runs the baseline with these knob values changed (doctor's trial)."""


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
    if not accum or not isinstance(value, int) or not isinstance(knob.default, int):
        return {knob.name: value}
    total = batch.global_batch(knob.default, accum[0].default)
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
