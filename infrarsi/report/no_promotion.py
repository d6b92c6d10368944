"""Why a run promoted nothing, and what to try next: the best candidate it measured with its
interval, its trials by status, and the likely reason read from what the run recorded.

Read from run.json and the contract alone, like the rest of the report. The reason is the first
that fits, in the order a person would look: the machine, the search space, failed trials,
re-verification, the budget, then the noise floor.
"""

from __future__ import annotations

import math
import statistics
from collections import Counter
from dataclasses import dataclass
from typing import cast

from infrarsi.contract import Contract
from infrarsi.noise import t_quantile
from infrarsi.records import RunResult, Verdict
from infrarsi.records.run import RunStatus
from infrarsi.report.setting import describe
from infrarsi.trials import Candidate

MEASURED_KINDS = ("search", "validation")
"""Trials that measured a candidate once against the run's baseline trial."""
DISTURBED_SHARE = 0.25
"""A share of trial time disturbed above which the machine, not the knobs, is the likely reason."""


@dataclass(kw_only=True, slots=True)
class NoPromotion:
    best: str
    """The best measured candidate with its 95% interval, or that none was measured."""
    trials: str
    """Every trial by status and by kind, in one line."""
    reason: str
    next_step: str

    def lines(self) -> list[str]:
        return [self.best, self.trials, f"Likely reason: {self.reason}", f"Next: {self.next_step}"]


def _counts(values: list[str]) -> str:
    return ", ".join(f"{n} {value}" for value, n in Counter(values).most_common())


def _best_verified(run: RunResult, contract: Contract) -> tuple[Verdict, str] | None:
    judged = [(v, v.job_speedup) for v in run.verdicts if v.job_speedup is not None]
    if not judged:
        return None
    best, (point, low, high) = max(judged, key=lambda judged_one: judged_one[1][0])
    return best, (f"Best measured: {describe(best.candidate, contract)}, {point:.3f}x the baseline's speed "
                  f"[{low:.3f}, {high:.3f}] (95% CI over {len(best.cand_job_s)} interleaved rounds; promotion "
                  f"needs the low end above {run.promotion_floor:.3f}x): {best.reason}")


def _best_searched(run: RunResult, contract: Contract) -> str | None:
    base_key = run.baseline.candidate.key() if run.baseline else None
    bases = [r.job_s for r in run.trials if r.kind == "baseline" and r.status == "ok" and r.job_s]
    measured = [(r, r.job_s) for r in run.trials if r.kind in MEASURED_KINDS and r.status == "ok" and r.job_s
                and Candidate.from_dict(r.candidate).key() != base_key]
    if not measured or not bases:
        return None
    best, best_s = min(measured, key=lambda trial: trial[1])
    point = statistics.median(bases) / best_s
    # One run against one run: doctor's floor is the 95% bound of such a ratio's noise.
    floor = max(run.noise_floor, 1.0)
    return (f"Best measured: {describe(Candidate.from_dict(best.candidate), contract)}, {point:.3f}x the baseline's "
            f"speed [{point / floor:.3f}, {point * floor:.3f}] (trial {best.number}: one run against the baseline's, "
            "the interval from doctor's run-to-run noise)")


def _unread_knobs(contract: Contract) -> list[str]:
    return [k.name for k in contract.knobs if k.role == "unknown"]


NOISIER = 1.5
"""Rounds whose spread exceeds what doctor expected by this much were measured on a busier machine."""
MOST_ROUNDS_WORTH = 12
"""Beyond this many rounds, longer runs are the cheaper way to a narrower interval."""


def undecided(verdict: Verdict, floor: float, expected_cv: float | None, rerun: str) -> tuple[str, str]:
    """Why an interval that straddles the floor stayed undecided, and what would decide it, from
    what its rounds measured: their spread against what doctor expected (a busier machine), or the
    rounds this spread needs for this gain (more rounds, or longer runs when that is many)."""
    point, low, _ = cast(tuple[float, float, float], verdict.job_speedup)
    logs = [[math.log(x) for x in xs] for xs in (verdict.base_job_s, verdict.cand_job_s) if len(xs) >= 2]
    df = sum(len(xs) - 1 for xs in logs)
    seen = math.sqrt(sum((x - statistics.fmean(xs)) ** 2 for xs in logs for x in xs) / df) if df else 0.0
    rounds = len(verdict.cand_job_s)
    said = (f"its interval reaches down to {low:.3f}x over {rounds} rounds whose job times spread {seen:.1%} a "
            "round")
    if expected_cv and seen > NOISIER * expected_cv:
        return (f"{said}, {seen / expected_cv:.1f}x the {expected_cv:.1%} doctor's baseline runs led to expect: the "
                "machine was busier than when doctor measured it"), f"a quieter machine: `{rerun} --wait-for-quiet`"
    if point <= floor:
        return f"{said}, and its point {point:.3f}x is not above the floor: no number of rounds would promote it", \
            "nothing: it is no faster than the baseline here"
    gain = math.log(point / floor)
    needed = next((n for n in range(2, 200) if t_quantile(0.995, 2 * n - 2) * seen * math.sqrt(2 / n) < gain), None)
    if needed is not None and needed <= MOST_ROUNDS_WORTH:
        return (f"{said}: a {point:.3f}x gain at this spread needs about {needed} rounds"), \
            f"more rounds: `most_rounds = {needed}` in the contract's [verify] table, then `{rerun}`"
    return (f"{said}: a {point:.3f}x gain at this spread needs {needed or 'over 200'} rounds"), \
        ("longer runs: each round's spread falls with the steps between verification's two lengths "
         f"(`infrarsi init --measured-steps N` with a larger N, then `infrarsi doctor`), then `{rerun}`")


def _reason(run: RunResult, contract: Contract, repo: str, verified: Verdict | None,
            measured: bool, expected_cv: float | None) -> tuple[str, str]:
    """The likely reason and the next step, the first that fits."""
    rerun = f"infrarsi run {repo}"
    statuses = Counter(r.status for r in run.trials)
    search = [r for r in run.trials if r.kind == "search"]
    disturbance = run.disturbance
    unread = _unread_knobs(contract)
    claim = (f"; {', '.join(unread)} had no role it could read and stayed fixed (`infrarsi init` with an "
             "Anthropic key lets a model claim one, which doctor's trials check)") if unread else ""
    if run.status not in (RunStatus.NO_PROMOTION, RunStatus.OK):
        return run.message, f"`{rerun}` again: the study keeps the trials it has and continues"
    if disturbance is not None and any(again.stopped for again in disturbance.renormalized):
        return ("other work took the machine for good during the run, so it stopped without promoting",
                f"`{rerun} --wait-for-quiet` once the machine is quiet again")
    if (statuses["disturbed"] and disturbance is not None
            and (disturbance.unresolved or disturbance.share >= DISTURBED_SHARE)):
        return ((f"other processes disturbed {statuses['disturbed']} of {len(run.trials)} trials "
                 f"({disturbance.share:.0%} of the trial time)"),
                f"a quieter machine: `{rerun} --wait-for-quiet`")
    if not contract.tunable and not any(c.status == "validated" for c in run.patch_checks):
        locked = [k.name for k in contract.knobs if k.role == "workload"]
        return ("nothing to search: no knob is tunable and no patch validated"
                + (f" ({', '.join(locked)} locked as the workload)" if locked else ""),
                ("`infrarsi init --scope` with the files the model and the loop live in, so patches find their "
                 "sites") + claim)
    if not search:
        return (f"no search trial ran ({run.search_ended or 'no reason recorded'})",
                f"`{rerun} --trials 20` runs that many search trials in the same study")
    if not measured:
        hint = ("a larger memory budget (`--budget-gib`) if the device has room" if statuses["oom"] > len(search) / 2
                else f"the failed trials' last lines in `infrarsi report {repo}` (Every trial)")
        failed = _counts([r.status for r in search if r.status != "ok"])
        return f"no candidate ran to the end: {failed or 'every search trial ran the baseline settings'}", hint
    if verified is not None and verified.job_speedup is not None:  # always: _best_verified picks a judged one
        _, low, high = verified.job_speedup
        if low <= run.promotion_floor and high > run.promotion_floor:
            return undecided(verified, run.promotion_floor, expected_cv, rerun)
        return verified.reason, f"its row in `infrarsi report {repo}` (Re-verified candidates)"
    if run.search_ended.startswith(("the budget", "the time budget")):
        return ((f"{run.search_ended} ended the search after {len(search)} search trials, before its model ran "
                 "out of candidates worth trying"),
                f"more trials: `{rerun} --trials {max(len(search), 10)}` runs that many more in the same study" + claim)
    return ((f"no candidate measured faster than the baseline beyond doctor's noise floor ({run.noise_floor:.3f}x "
             f"for one run), and the search ended: {run.search_ended or 'no reason recorded'}"),
            "a quieter machine lowers the floor (`infrarsi doctor` measures it again)" + claim)


def explain(run: RunResult, contract: Contract, repo: str, expected_cv: float | None = None) -> NoPromotion:
    """Why ``run`` promoted nothing (call it only for a run without a promoted candidate);
    ``expected_cv``: the spread of a verification round doctor expected (``DoctorReport.round_cv``)."""
    verified = _best_verified(run, contract)
    best = verified[1] if verified else _best_searched(run, contract)
    kinds = _counts([r.kind for r in run.trials])
    reason, next_step = _reason(run, contract, repo, verified[0] if verified else None, best is not None, expected_cv)
    return NoPromotion(
        best=best or "Best measured: none; no candidate other than the baseline ended ok",
        trials=(f"Trials: {len(run.trials)} ({kinds}): {_counts([r.status for r in run.trials])}" if run.trials
                else "Trials: none ran"),
        reason=reason, next_step=next_step)
