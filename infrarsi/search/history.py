"""Reading trial history: what was measured, what failed for good, what a measured job costs."""

from __future__ import annotations

import math
import statistics

from infrarsi.trials import Candidate, TrialResult, TrialStatus
from infrarsi.whole_process import job_seconds


def measured_keys(history: list[TrialResult]) -> set[str]:
    """Every candidate tried, whatever its status: none is proposed again."""
    return {t.candidate.key() for t in history}


def failed_keys(history: list[TrialResult], statuses: tuple[TrialStatus, ...] | None = None) -> set[str]:
    """Candidates that failed for a deterministic reason (or for one of ``statuses``)."""
    return {
        t.candidate.key()
        for t in history
        if (t.status in statuses if statuses is not None else t.status.deterministic)
    }


def measured_job_s(trial: TrialResult, planned_steps: int) -> float:
    """The measured projection of the real job (inf when no step was timed), for ranking."""
    job = job_seconds(trial, planned_steps)
    return math.inf if job is None else job


def best_ok(history: list[TrialResult], planned_steps: int) -> TrialResult | None:
    oks = [t for t in history if t.ok and t.step_time is not None]
    return min(oks, key=lambda t: measured_job_s(t, planned_steps)) if oks else None


def _measured_speedups(history: list[TrialResult], baseline: Candidate,
                       planned_steps: int) -> dict[str, tuple[float, Candidate]]:
    """Each measured candidate's median measured job time against the baseline's (above 1: faster);
    none that failed deterministically, empty before the baseline is measured."""
    runs: dict[str, list[float]] = {}
    cands: dict[str, Candidate] = {}
    failed = failed_keys(history)
    for t in history:
        if t.ok and t.step_time and t.candidate.key() not in failed:
            runs.setdefault(t.candidate.key(), []).append(measured_job_s(t, planned_steps))
            cands.setdefault(t.candidate.key(), t.candidate)
    base = runs.pop(baseline.key(), None)
    if not base:
        return {}
    base_s = statistics.median(base)
    return {k: (base_s / statistics.median(v), cands[k]) for k, v in runs.items()}


def measured_fast(history: list[TrialResult], baseline: Candidate, planned_steps: int,
                  min_speedup: float) -> list[Candidate]:
    """Candidates whose median measured job time beats the baseline's by more than
    ``min_speedup`` (doctor's noise floor), fastest first; none that failed deterministically."""
    speedups = _measured_speedups(history, baseline, planned_steps).values()
    return [c for s, c in sorted(speedups, key=lambda sc: -sc[0]) if s > min_speedup]


def unmatched_fastest(history: list[TrialResult], chosen: list[Candidate], baseline: Candidate,
                      planned_steps: int, min_speedup: float) -> list[Candidate]:
    """The fastest of :func:`measured_fast`, unless one of ``chosen`` measured within
    ``min_speedup`` (doctor's noise floor) of it: a model may rank first a setting it never ran or
    one it ran slower, and what the trials showed is then verified too; two measured within noise
    of each other are one answer, verified once."""
    fast = measured_fast(history, baseline, planned_steps, min_speedup)
    if not fast:
        return []
    speedups = _measured_speedups(history, baseline, planned_steps)
    best = speedups[fast[0].key()][0]
    if any(c.key() in speedups and best / speedups[c.key()][0] <= min_speedup for c in chosen):
        return []
    return fast[:1]


def believable_gain(history: list[TrialResult], candidates: list[Candidate], baseline: Candidate,
                    planned_steps: int, min_speedup: float) -> float | None:
    """The least job speed-up the search's own trials make believable for every one of
    ``candidates``: each one's measured speed-up over the baseline over ``min_speedup`` (doctor's
    noise floor, what one run's comparison can show by chance), so the best of many noisy trials is
    not taken at its luckiest. None when one of them was not measured. Verification sizes its
    rounds for it and never counts it as evidence: the trials ran at other times, and the search
    chose the candidate for them."""
    speedups = _measured_speedups(history, baseline, planned_steps)
    if not candidates or any(c.key() not in speedups for c in candidates):
        return None
    return min(speedups[c.key()][0] for c in candidates) / min_speedup


def measured_slow(history: list[TrialResult], baseline: Candidate, planned_steps: int,
                  min_speedup: float) -> set[str]:
    """Candidates whose median measured job time is slower than the baseline's by more than
    ``min_speedup`` (doctor's noise floor)."""
    return {k for k, (s, _) in _measured_speedups(history, baseline, planned_steps).items() if s * min_speedup < 1}


def distinct(candidates: list[Candidate]) -> list[Candidate]:
    seen: dict[str, Candidate] = {}
    for cand in candidates:
        seen.setdefault(cand.key(), cand)
    return list(seen.values())
