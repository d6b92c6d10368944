"""When a run is already clearly slower than a bound, so finishing it would only spend time.

A median over at least ``MIN_STEPS`` measured steps, compared with the bound plus a margin, so one
slow step (a page fault, a noisy neighbour) never aborts a run. The margin is several times the
~2% step-time noise measured on the development machines.
"""

from __future__ import annotations

import statistics

MIN_STEPS = 3
MARGIN = 0.10
FAR = 3.0
"""A run this many times slower than the bound is stopped after two steps, warm-up ones included: no
noise makes a 3x difference, and the first step (compilation, allocator warm-up) is never counted."""


def clearly_slower(step_times: list[float], bound: float | None) -> bool:
    if bound is None or len(step_times) < MIN_STEPS:
        return False
    return statistics.median(step_times) > bound * (1.0 + MARGIN)


def far_slower(steps_after_first: list[float], bound: float | None) -> bool:
    if bound is None or len(steps_after_first) < 2:
        return False
    return statistics.median(steps_after_first) > bound * FAR
