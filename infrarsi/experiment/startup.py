"""What start-up a candidate declares: the search's trials and re-verification judge it the same way."""

from __future__ import annotations

from infrarsi import patches as patch_library
from infrarsi.contract import Contract
from infrarsi.trials import Candidate


def patch_startup_s(contract: Contract, patch: str) -> float:
    """The one-off start-up a patch declares on this device (its prior's ``startup_s``; 0: none)."""
    known = patch_library.REGISTRY.get(patch)
    belief = known.prior.get(contract.memory.device) if known is not None else None
    return belief.effect.startup_s if belief is not None else 0.0


def cannot_pay_back(contract: Contract, patch: str, step_s: float | None) -> str | None:
    """Why a patch is not worth a trial: its one-off start-up alone is longer than the whole job
    at the planned length (baseline steps of ``step_s``), so no speed-up of the steps can repay it;
    None when it may pay back."""
    startup_s, planned = patch_startup_s(contract, patch), contract.workload.planned_steps
    if not step_s or startup_s <= planned * step_s:
        return None
    return (f"its one-off start-up (about {startup_s:.0f} s by its prior) is longer than the whole job: "
            f"{planned} planned steps of {step_s * 1000:.0f} ms, {planned * step_s:.1f} s; it cannot pay back")


def declared_startup(contract: Contract, candidate: Candidate) -> float | None:
    """Compilation's start-up is a declared one-off cost of any size (None); other candidates
    declare none, so their start-up must stay within the baseline's noise."""
    compiles = any(contract.knob(k).role == "compile" and bool(v) for k, v in candidate.knobs.items()) or any(
        patch_startup_s(contract, p) > 0 for p in candidate.patches)
    return None if compiles else 0.0
