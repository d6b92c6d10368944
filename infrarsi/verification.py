"""Re-verification: candidates rerun against the baseline in interleaved order, then judged.

A candidate is promoted only if the lower bound of its job-time speedup clears the noise floor
doctor measured and every one of its reruns kept the loss invariant. Interleaving (baseline, A, B,
baseline, A, B …) spreads slow drifts of the machine over all arms instead of one.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import asdict, dataclass, field

from infrarsi.noise import SpeedupInterval, speedup_interval
from infrarsi.runner.result import Candidate, TrialResult

RunOne = Callable[[Candidate, int], TrialResult]
"""Runs one candidate once (the int is the round); the caller records it wherever it keeps trials."""


def job_seconds(result: TrialResult, planned_steps: int) -> float | None:
    """Projected job time: start-up once, then the planned steps at the measured step time."""
    if result.step_time is None:
        return None
    return (result.startup_s or 0.0) + planned_steps * result.step_time


@dataclass(kw_only=True, slots=True)
class Verdict:
    candidate: Candidate
    promoted: bool
    reason: str
    job_speedup: tuple[float, float, float] | None = None
    """(point, low, high) of baseline job time over candidate job time."""
    step_speedup: tuple[float, float, float] | None = None
    base_step_s: list[float] = field(default_factory=list)
    """Median step time of each baseline rerun."""
    cand_step_s: list[float] = field(default_factory=list)
    base_job_s: list[float] = field(default_factory=list)
    cand_job_s: list[float] = field(default_factory=list)
    statuses: list[str] = field(default_factory=list)
    max_loss_diff: float | None = None
    """Largest |candidate loss - baseline loss| over compared steps and reruns."""
    peak_bytes: int | None = None

    def to_dict(self) -> dict:
        data = asdict(self)
        data["candidate"] = self.candidate.to_dict()
        return data

    @classmethod
    def from_dict(cls, data: dict) -> Verdict:
        data = dict(data)
        data["candidate"] = Candidate.from_dict(data["candidate"])
        for key in ("job_speedup", "step_speedup"):
            if data.get(key) is not None:
                data[key] = tuple(data[key])
        return cls(**data)


def interleave(candidates: list[Candidate], rounds: int, run_one: RunOne, baseline: Candidate) -> dict[str, list[TrialResult]]:
    """Run baseline and candidates round-robin; results by candidate key (baseline under its own key)."""
    arms = [baseline, *[c for c in candidates if c.key() != baseline.key()]]
    results: dict[str, list[TrialResult]] = {arm.key(): [] for arm in arms}
    for r in range(rounds):
        for arm in arms:
            results[arm.key()].append(run_one(arm, r))
    return results


def _interval(base: list[float], cand: list[float]) -> SpeedupInterval | None:
    if len(base) < 2 or len(cand) < 2:
        return None
    return speedup_interval(base, cand)


def judge(
    candidate: Candidate,
    base_runs: list[TrialResult],
    cand_runs: list[TrialResult],
    *,
    planned_steps: int,
    noise_floor: float,
    compare_steps: int,
) -> Verdict:
    """Promote or not, and say why, from the interleaved reruns of one candidate."""
    statuses = [r.status.value for r in cand_runs]
    base_ok = [r for r in base_runs if r.ok]
    verdict = Verdict(candidate=candidate, promoted=False, reason="", statuses=statuses)
    failed = [r for r in cand_runs if not r.ok]
    if failed:
        verdict.reason = f"{len(failed)} of {len(cand_runs)} reruns ended {failed[0].status.value}: {failed[0].detail}".strip(": ")
        return verdict
    if len(base_ok) < 2:
        verdict.reason = "fewer than two baseline reruns succeeded"
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
    job = _interval(verdict.base_job_s, verdict.cand_job_s)
    step = _interval(verdict.base_step_s, verdict.cand_step_s)
    verdict.job_speedup = tuple(job) if job else None
    verdict.step_speedup = tuple(step) if step else None
    if job is None:
        verdict.reason = "too few reruns for an interval"
    elif job.clears(noise_floor):
        verdict.promoted = True
        verdict.reason = f"speedup {job.point:.3f}x, 95% CI [{job.low:.3f}, {job.high:.3f}] clears the noise floor {noise_floor:.3f}"
    else:
        verdict.reason = f"speedup {job.point:.3f}x, 95% CI [{job.low:.3f}, {job.high:.3f}] does not clear the noise floor {noise_floor:.3f}"
    return verdict


def best_promoted(verdicts: list[Verdict]) -> Verdict | None:
    """Among candidates whose whole interval cleared the floor, the fastest by point estimate: a wider
    interval means noisier reruns, not a slower candidate (the lower bound only breaks ties)."""
    promoted = [v for v in verdicts if v.promoted]
    return max(promoted, key=lambda v: (v.job_speedup[0], v.job_speedup[1])) if promoted else None
