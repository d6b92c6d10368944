"""When a run is already clearly slower than a bound, so finishing it would only spend time.

A median over at least ``MIN_STEPS`` measured steps, compared with the bound plus a margin, so one
slow step (a page fault, a noisy neighbour) never aborts a run. The margin is several times the
~2% step-time noise measured on the development machines.
"""

from __future__ import annotations

import statistics

MIN_STEPS = 3
MARGIN = 0.10


def clearly_slower(step_times: list[float], bound: float | None) -> bool:
    if bound is None or len(step_times) < MIN_STEPS:
        return False
    return statistics.median(step_times) > bound * (1.0 + MARGIN)
