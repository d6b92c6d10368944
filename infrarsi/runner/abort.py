"""When a run is already clearly slower than a bound, so finishing it would only spend time.

A median over at least ``MIN_STEPS`` measured steps, compared with the bound plus a margin, so one
slow step (a page fault, a noisy neighbour) never aborts a run. The margin is several times the
~2% step-time noise measured on the development machines.

Real loops carry periodic work in some steps (an evaluation, a text sample, a checkpoint at step
0 or every N steps) in every run, the baseline's included. So each step is compared with the
baseline's step of the same index (:func:`like_baseline`): a step the baseline also spent 11 s on
counts as one of its ordinary steps, never as the reason a candidate is aborted.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence

MIN_STEPS = 3
MARGIN = 0.10
FAR = 3.0
"""A run this many times slower than the bound is stopped after two steps, warm-up ones included: no
noise makes a 3x difference, and the first step (compilation, allocator warm-up) is never counted."""


def like_baseline(steps: Sequence[tuple[int, float]], baseline: Sequence[float], warmup: int) -> list[float]:
    """Each ``(index, seconds)`` step as an ordinary step, by the more lenient of two readings of
    the baseline's step of that index: its extra seconds over the baseline's median measured step
    taken away (periodic work that takes as long whatever the settings), or the step scaled by how
    many times longer it was (work that speeds up with the rest). A step the baseline did not run,
    or one no longer than usual, is left as it is."""
    measured = [t for t in baseline[warmup:] if t > 0]
    typical = statistics.median(measured) if measured else 0.0
    out = []
    for index, seconds in steps:
        base = baseline[index] if typical and index < len(baseline) else typical
        if not typical or base <= typical:
            out.append(seconds)
        else:
            out.append(max(0.0, min(seconds - (base - typical), seconds * typical / base)))
    return out


PERIODIC = 3.0
"""A step this many times the run's median step, in every run, carries periodic work."""


def periodic_steps(runs: Sequence[Sequence[float]]) -> dict[int, float]:
    """Steps that carry extra work in every one of ``runs`` (each run's step times by index):
    index -> the least extra seconds any run spent in it beyond its median step."""
    if not runs or not all(runs):
        return {}
    typical = [statistics.median(r) for r in runs]
    out = {}
    for index in range(min(len(r) for r in runs)):
        extra = [r[index] - t for r, t in zip(runs, typical, strict=True)]
        if all(r[index] > PERIODIC * t for r, t in zip(runs, typical, strict=True)):
            out[index] = min(extra)
    return out


def clearly_slower(step_times: list[float], bound: float | None) -> bool:
    if bound is None or len(step_times) < MIN_STEPS:
        return False
    return statistics.median(step_times) > bound * (1.0 + MARGIN)


def far_slower(steps_after_first: list[float], bound: float | None) -> bool:
    if bound is None or len(steps_after_first) < 2:
        return False
    return statistics.median(steps_after_first) > bound * FAR
