"""Which candidates change the numerics by design, and so are judged against the looser, declared
loss tolerance: bf16/fp16 settings, and patches that declare it (``Patch.numerics_by_design``)."""

from __future__ import annotations

from infrarsi import patches as patch_library
from infrarsi.trials import Candidate

LOW_PRECISION = ("bfloat16", "float16", "bf16", "fp16")


def numerics_by_design(candidate: Candidate) -> bool:
    by_patch = any(getattr(patch_library.REGISTRY.get(p), "numerics_by_design", False) for p in candidate.patches)
    return by_patch or any(str(v) in LOW_PRECISION for v in candidate.knobs.values())
