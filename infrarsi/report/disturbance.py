"""What a run's disturbance record (``RunResult.disturbance``, written by ``experiment/quiet.py``) says,
in sentences for the terminal and the report."""

from __future__ import annotations

from infrarsi.records import Disturbance

SHOWN = 6
"""Reruns listed by name (all of them are in the record)."""


def words(disturbance: Disturbance | None, *, list_reruns: bool = True) -> list[str]:
    """The summary in sentences, for the terminal and the report; the terminal's compact summary
    leaves out the list of reruns (``list_reruns=False``), the report names them."""
    if disturbance is None:
        return []
    out = []
    bg = disturbance.background
    if bg.busy:
        out.append(f"doctor found the machine busy: other processes used {bg.idle_cores:.2f} of {bg.cores} "
                   f"cores before the baseline ran (its normal includes them)")
    n, total = disturbance.trials, disturbance.of_trials
    if n:
        out.append(f"{n} of {total} trials disturbed by other processes (beyond doctor's normal: "
                   f"{bg.limit_cores:.2f} of {bg.cores} cores, or waiting for a CPU {bg.limit_denied:.0%} of the time), "
                   f"{disturbance.seconds:.0f} s, {disturbance.share:.0%} of the run's trial time; "
                   f"{len(disturbance.reruns)} reruns"
                   + (f", {len(disturbance.unresolved)} still disturbed after {disturbance.max_reruns} reruns (not used)"
                      if disturbance.unresolved else ""))
        reruns = disturbance.reruns
        shown = "; ".join(f"trial {r.of} ({r.kind}) as trial {r.trial}: {r.status}" for r in reruns[:SHOWN])
        if reruns and list_reruns:
            out.append(f"rerun: {shown}" + (f"; and {len(reruns) - SHOWN} more" if len(reruns) > SHOWN else ""))
    else:
        out.append("no trial disturbed by other processes beyond doctor's normal background")
    for again in disturbance.renormalized:
        stayed = f"trial {again.after_trial} stayed disturbed after a rerun"
        if again.background is None:
            out.append(f"{stayed}: measuring the machine's normal again failed (trial {again.trial}, a baseline "
                       f"run, ended {again.failed}), so later trials were judged against doctor's normal")
            continue
        now = again.background
        then = ("so the run stopped there without promoting (the rest would have measured another machine)"
                if again.stopped else f"and later trials were judged against that ({now.limit_cores:.2f} cores)")
        out.append(f"{stayed}: the machine's normal was measured again (trial {again.trial}, a baseline run): "
                   f"other processes now use {now.normal_cores:.2f} of {now.cores} cores, the baseline runs "
                   f"{again.slowdown:.2f}x slower, {then}")
    if disturbance.waited_s:
        out.append(f"waited {disturbance.waited_s:.0f} s for the machine to be quiet")
    return out
