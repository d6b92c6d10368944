"""A candidate as what it changes from the baseline: the knobs it moves, in data and in words."""

from __future__ import annotations

from infrarsi.contract import Contract, KnobValue
from infrarsi.trials import Candidate


def changed_knobs(candidate: Candidate, contract: Contract) -> dict[str, KnobValue]:
    """Knobs the candidate sets to something else than the contract's default (unknown knobs dropped)."""
    known = {k.name: k for k in contract.knobs}
    return {k: v for k, v in candidate.knobs.items() if k in known and known[k].default != v}


def describe(candidate: Candidate, contract: Contract) -> str:
    """The candidate as its difference from the baseline: ``micro_batch=8, +sdpa_attention``."""
    defaults = contract.defaults()
    knobs = [f"{k}={v}" for k, v in sorted(candidate.knobs.items()) if k not in defaults or defaults[k] != v]
    return ", ".join([*knobs, *(f"+{p}" for p in candidate.patches)]) or "baseline"
