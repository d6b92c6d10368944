"""What start-up a candidate declares: the search's trials and re-verification judge it the same way."""

from __future__ import annotations

from infrarsi import patches as patch_library
from infrarsi.contract import Contract
from infrarsi.trials import Candidate


def declared_startup(contract: Contract, candidate: Candidate) -> float | None:
    """Compilation's start-up is a declared one-off cost of any size (None); other candidates
    declare none, so their start-up must stay within the baseline's noise."""
    device = contract.memory.device

    def compiled(patch: str) -> bool:
        belief = patch_library.REGISTRY[patch].prior.get(device) if patch in patch_library.REGISTRY else None
        return belief is not None and belief.effect.startup_s > 0

    compiles = any(contract.knob(k).role == "compile" and bool(v) for k, v in candidate.knobs.items()) or any(
        compiled(p) for p in candidate.patches)
    return None if compiles else 0.0
