"""Re-verification: candidates rerun against the baseline in interleaved order, then judged.

A candidate is promoted only if the lower bound of its job-time speedup clears the promotion floor
(``infrarsi.noise.PROMOTION_FLOOR``), every one of its reruns kept the loss invariant, and its
start-up did not grow past the baseline's in the same rounds by more than noise and the one-off
cost it declares (``runner.accounting.startup_problem``: the measured steps' work moved before the
first step would otherwise look free).
Interleaving (baseline, A, B, baseline, A, B …) spreads slow drifts of the machine over all arms
instead of one. A rerun that other processes disturbed (runner/interference.py) is repeated by the
caller (stages/quiet.py) rather than widening the interval; one still disturbed after its reruns
counts as a missing measurement, never as a failure of its candidate.

How many rounds is sequential (:class:`Rounds`): at least ``least``, then one more at a time while
a candidate's interval still straddles the floor, up to ``most``. One slow round on a busy machine
then widens the interval instead of deciding the run. Looking after every round would inflate the
false-promotion rate, and so would judging several candidates, so each interval gets a Bonferroni
share of the error (looks × candidates): all the intervals hold together with the stated
confidence, and that is the "95% CI" the report prints.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from infrarsi.noise import SpeedupInterval, speedup_interval
from infrarsi.records.verdict import Verdict
from infrarsi.runner.accounting import startup_problem
from infrarsi.runner.result import Candidate, TrialResult, TrialStatus

RunOne = Callable[[Candidate, int], TrialResult]
"""Runs one candidate once (the int is the round); the caller records it wherever it keeps trials."""
DeclaredStartup = Callable[[Candidate], "float | None"]
"""The one-off start-up seconds a candidate declares (compilation); None: any start-up is its own."""


def job_seconds(result: TrialResult, planned_steps: int) -> float | None:
    """Projected job time: start-up once, then the planned steps at the measured step time."""
    if result.step_time is None:
        return None
    return (result.startup_s or 0.0) + planned_steps * result.step_time


@dataclass(frozen=True, slots=True)
class Rounds:
    """Sequential verification: ``least`` rounds, then more while undecided, at most ``most``."""

    least: int = 3
    most: int = 6
    confidence: float = 0.95

    def __post_init__(self) -> None:
        if not 2 <= self.least <= self.most:
            raise ValueError(f"rounds need 2 <= least <= most, got least={self.least}, most={self.most}")

    @property
    def looks(self) -> int:
        """How many times the intervals may be looked at, the last round included."""
        return self.most - self.least + 1

    @property
    def per_look(self) -> float:
        """One interval's level when a single candidate is looked at after every round."""
        return per_look(self.confidence, self.looks)

    def run(self, run_round: Callable[[int], None], decided: Callable[[int], bool]) -> int:
        """Run rounds until ``decided(rounds_done)`` or ``most``; how many rounds ran."""
        for r in range(self.most):
            run_round(r)
            if decided(r + 1):
                return r + 1
        return self.most


def ahead_of_baseline(ranked: list[Candidate], baseline: Candidate, k: int) -> list[Candidate]:
    """The first ``k`` of ``ranked`` (fastest first) that it puts ahead of the baseline: only those
    are expected to be faster; the rest would spend every round confirming that they are not."""
    keys = [c.key() for c in ranked]
    ahead = ranked[:keys.index(baseline.key())] if baseline.key() in keys else ranked
    return ahead[:k]


def per_look(confidence: float, looks: int) -> float:
    """Bonferroni: each of ``looks`` intervals gets an equal share of the error."""
    return 1 - (1 - confidence) / looks


def interleave(candidates: list[Candidate], baseline: Candidate, run_one: RunOne, *, rounds: Rounds,
               planned_steps: int, floor: float, compare_steps: int,
               declared_startup: DeclaredStartup = lambda _: 0.0) -> tuple[list[Verdict], list[TrialResult]]:
    """Rerun baseline and candidates round-robin until each candidate is decided; verdicts and baseline runs.

    A candidate leaves the rotation once it is promoted, has failed a rerun, cannot clear the floor
    (its upper bound is below it), or is slower than a candidate already promoted.
    """
    arms = list({c.key(): c for c in candidates if c.key() != baseline.key()}.values())
    base_runs: list[TrialResult] = []
    runs: dict[str, list[TrialResult]] = {c.key(): [] for c in arms}
    verdicts: dict[str, Verdict] = {}
    active = list(arms)

    def run_round(r: int) -> None:
        base_runs.append(run_one(baseline, r))
        for arm in active:
            runs[arm.key()].append(run_one(arm, r))

    def decided(done: int) -> bool:
        # Before `least` rounds only a failed rerun settles a candidate; speed is judged after.
        judged = active if done >= rounds.least else [a for a in active if _failed(runs[a.key()][-1])]
        for arm in judged:
            verdicts[arm.key()] = judge(arm, base_runs, runs[arm.key()], planned_steps=planned_steps,
                                        floor=floor, compare_steps=compare_steps,
                                        confidence=rounds.confidence, looks=rounds.looks * len(arms),
                                        declared_startup_s=declared_startup(arm))
        if done < rounds.least:
            active[:] = [a for a in active if a not in judged]
            return not active
        best = best_promoted(list(verdicts.values()))
        active[:] = [a for a in active if _undecided(verdicts[a.key()], floor, best)]
        return not active

    rounds.run(run_round, decided)
    return [verdicts[c.key()] for c in arms], base_runs


def _failed(run: TrialResult) -> bool:
    """A rerun that says something against its candidate: a disturbed one (still disturbed after
    its own reruns, stages/quiet.py) only lacks a measurement."""
    return not run.ok and run.status is not TrialStatus.DISTURBED


def _undecided(verdict: Verdict, floor: float, best: Verdict | None) -> bool:
    if verdict.promoted or any(s not in ("ok", "disturbed") for s in verdict.statuses) or verdict.job_speedup is None:
        return False
    point, _, high = verdict.job_speedup
    if high <= floor:
        return False
    return best is None or point > best.job_speedup[0]


def _interval(base: list[float], cand: list[float], confidence: float) -> SpeedupInterval | None:
    if len(base) < 2 or len(cand) < 2:
        return None
    return speedup_interval(base, cand, confidence)


def judge(
    candidate: Candidate,
    base_runs: list[TrialResult],
    cand_runs: list[TrialResult],
    *,
    planned_steps: int,
    floor: float,
    compare_steps: int,
    confidence: float = 0.95,
    looks: int = 1,
    declared_startup_s: float | None = 0.0,
) -> Verdict:
    """Promote or not, and say why, from the interleaved reruns of one candidate.

    A caller that may look ``looks`` times (rounds × candidates) gives each interval a Bonferroni
    share of the error, so the stated ``confidence`` holds over all its looks together.
    """
    level = per_look(confidence, looks)
    label = f"{confidence:.0%} CI" + (f" (Bonferroni over {looks} looks)" if looks > 1 else "")
    statuses = [r.status.value for r in cand_runs]
    base_ok = [r for r in base_runs if r.ok]
    verdict = Verdict(candidate=candidate, promoted=False, reason="", statuses=statuses)
    failed = [r for r in cand_runs if _failed(r)]
    if failed:
        verdict.reason = f"{len(failed)} of {len(cand_runs)} reruns ended {failed[0].status.value}: {failed[0].detail}".strip(": ")
        return verdict
    cand_runs = [r for r in cand_runs if r.ok]  # a disturbed round measured nothing
    if len(base_ok) < 2:
        verdict.reason = "fewer than two baseline reruns succeeded"
        return verdict
    if not cand_runs:
        verdict.reason = "every rerun of the candidate was disturbed by other processes: nothing measured"
        return verdict
    verdict.base_step_s = [r.step_time for r in base_ok]
    verdict.cand_step_s = [r.step_time for r in cand_runs]
    verdict.base_job_s = [job_seconds(r, planned_steps) for r in base_ok]
    verdict.cand_job_s = [job_seconds(r, planned_steps) for r in cand_runs]
    verdict.peak_bytes = max((r.peak_bytes or 0) for r in cand_runs) or None
    diffs = [
        abs(c - b)
        for cr in cand_runs
        for br in base_ok[:1]
        for c, b in zip(cr.losses[:compare_steps], br.losses[:compare_steps])
        if math.isfinite(c) and math.isfinite(b)
    ]
    verdict.max_loss_diff = max(diffs) if diffs else None
    moved = startup_problem([r.startup_s for r in base_ok], [r.startup_s for r in cand_runs],
                            declared_s=declared_startup_s)
    if moved:
        verdict.reason = moved
        return verdict
    job = _interval(verdict.base_job_s, verdict.cand_job_s, level)
    step = _interval(verdict.base_step_s, verdict.cand_step_s, level)
    verdict.job_speedup = tuple(job) if job else None
    verdict.step_speedup = tuple(step) if step else None
    if job is None:
        verdict.reason = "too few reruns for an interval"
    elif job.clears(floor):
        verdict.promoted = True
        verdict.reason = f"speedup {job.point:.3f}x, {label} [{job.low:.3f}, {job.high:.3f}] over {len(cand_runs)} rounds clears the promotion floor {floor:.3f}"
    else:
        verdict.reason = f"speedup {job.point:.3f}x, {label} [{job.low:.3f}, {job.high:.3f}] over {len(cand_runs)} rounds does not clear the promotion floor {floor:.3f}"
    return verdict


def best_promoted(verdicts: list[Verdict]) -> Verdict | None:
    """Among candidates whose whole interval cleared the floor, the fastest by point estimate: a wider
    interval means noisier reruns, not a slower candidate (the lower bound only breaks ties)."""
    promoted = [v for v in verdicts if v.promoted]
    return max(promoted, key=lambda v: (v.job_speedup[0], v.job_speedup[1])) if promoted else None
