"""How noisy the baseline is, and what that lets us trust.

Three rules live here, each the single place it is decided:

- **Smallest trustworthy speedup** (:func:`min_trustworthy_speedup`, "the noise floor").
  Comparing one run of a candidate with one run of the baseline, the log-ratio of their median
  step times has a standard deviation of about ``sqrt(2)·cv`` where ``cv`` is the run-to-run
  coefficient of variation of a run's median step time. A speedup below ``1 + z·sqrt(2)·cv`` (z = 1.96 at 95%) can be noise.
  Two or three runs estimate ``cv`` poorly, so ``cv`` is never taken below the standard error of a
  median the within-run noise alone implies (``1.2533·cv_within/sqrt(steps)``), and the result is
  never below :data:`MIN_SPEEDUP_FLOOR`. Re-verification repeats the comparison in interleaved
  rounds instead; its interval must clear :data:`PROMOTION_FLOOR`.
- **Speedup confidence interval** (:func:`speedup_interval`). Welch's t interval on the difference
  of mean log-times, exponentiated: the speedup is a ratio, logs make it a difference, and t (not
  z, not a bootstrap) stays honest with the 2–5 samples verification can afford. Verification,
  which measures several arms on one machine in the same rounds, pools their spread
  (:func:`pooled_speedup_interval`): one variance from every arm's rounds gives t the degrees of
  freedom two or three rounds of one arm cannot, and a candidate noisier than the pool is judged
  by Welch's interval on its own spread instead. The pool is moderated toward the spread doctor
  expects of a round (:class:`SpreadPrior`), so two rounds that happen to agree are not read as a
  quiet machine, nor two that disagree as a noisy one.
- **Loss tolerance** (:func:`loss_tolerance`). Same-seed reruns of the baseline show the run-to-run
  numerical spread (zero on a CPU, where they are bitwise identical; non-zero on GPUs with
  non-deterministic kernels). A rerun that only reorders float sums (another micro-batch split of
  the same global batch) shows reassociation noise, the largest change a numerics-preserving
  candidate may legitimately cause. The tolerance is ``LOSS_SAFETY`` times the largest deviation
  seen in the first K steps, and never below ``LOSS_REL_FLOOR`` of the loss. Changes that alter
  numerics by design (bf16, tf32) are judged against the declared ``NUMERICS_REL`` of the loss.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from statistics import NormalDist
from typing import NamedTuple

MIN_SPEEDUP_FLOOR = 1.01
"""No single-run comparison trusts less than 1%, however quiet the baseline looked."""
PROMOTION_FLOOR = MIN_SPEEDUP_FLOOR
"""What re-verification's interval must clear to promote. The interval's width already comes from
the interleaved reruns' own noise, so the bar is significance plus this margin for what
interleaving cannot cancel; demanding the one-run floor as well would count the noise twice."""
MEDIAN_EFFICIENCY = math.sqrt(math.pi / 2)
"""Standard error of a sample median over that of the mean, for normal data (1.2533)."""

LOSS_SAFETY = 10.0
LOSS_REL_FLOOR = 1e-5
NUMERICS_REL = 0.01


def cv(values: list[float]) -> float:
    """Coefficient of variation (sample standard deviation over mean); 0 for fewer than 2 values."""
    if not values:
        raise ValueError("cv of no values")
    if len(values) < 2:
        return 0.0
    mean = statistics.fmean(values)
    return statistics.stdev(values) / mean if mean else math.inf


def _z(confidence: float) -> float:
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    return NormalDist().inv_cdf(0.5 + confidence / 2)


def min_trustworthy_speedup(run_cv: float, confidence: float = 0.95) -> float:
    """The smallest speedup one run each of baseline and candidate can show beyond noise."""
    return max(MIN_SPEEDUP_FLOOR, 1 + _z(confidence) * math.sqrt(2) * run_cv)


@dataclass(kw_only=True, slots=True)
class StepNoise:
    """Step-time noise of repeated baseline runs."""

    runs: int
    steps_per_run: int
    """Measured steps in the shortest run."""
    step_s: float
    """Median over runs of each run's median step time."""
    run_medians: list[float]
    within_run_cv: float
    """Mean over runs of each run's step-time CV, lone outliers left out (:func:`within_cv`)."""
    run_to_run_cv: float
    """CV of the runs' median step times."""
    effective_cv: float
    """The run-level CV the floor uses: run-to-run, but at least what within-run noise implies."""
    confidence: float
    min_speedup: float
    """Smallest trustworthy speedup (see the module docstring)."""

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> StepNoise:
        return cls(**data)


OUTLIER_MADS = 5.0
"""A step further than this many robust standard deviations (1.4826 x the median absolute
deviation) from its run's median is a lone outlier (a page fault burst, a log flush): it is left
out of the within-run CV, which it alone would otherwise set (one 2 s step among 0.2 s steps made
it 0.8 and the one-run floor 1.88x). The medians keep every step."""


def within_cv(steps: list[float]) -> float:
    """One run's step-time CV without its lone outliers (``OUTLIER_MADS``)."""
    median = statistics.median(steps)
    mad = statistics.median(abs(x - median) for x in steps)
    kept = [x for x in steps if abs(x - median) <= OUTLIER_MADS * 1.4826 * mad] if mad > 0 else steps
    return cv(kept)


def step_noise(runs: list[list[float]], confidence: float = 0.95) -> StepNoise:
    """Noise statistics from the measured step times of each run (one list per run)."""
    if len(runs) < 2:
        raise ValueError(f"run-to-run noise needs at least 2 runs, got {len(runs)}")
    if any(len(r) < 2 for r in runs):
        raise ValueError("every run needs at least 2 measured steps")
    medians = [statistics.median(r) for r in runs]
    within = statistics.fmean(within_cv(r) for r in runs)
    steps = min(len(r) for r in runs)
    between = cv(medians)
    effective = max(between, MEDIAN_EFFICIENCY * within / math.sqrt(steps))
    return StepNoise(
        runs=len(runs),
        steps_per_run=steps,
        step_s=statistics.median(medians),
        run_medians=medians,
        within_run_cv=within,
        run_to_run_cv=between,
        effective_cv=effective,
        confidence=confidence,
        min_speedup=min_trustworthy_speedup(effective, confidence),
    )


class SpeedupInterval(NamedTuple):
    """Baseline time over candidate time: above 1 means the candidate is faster."""

    point: float
    low: float
    high: float

    def clears(self, threshold: float) -> bool:
        """Whether the whole interval lies above ``threshold`` (e.g. doctor's min speedup)."""
        return self.low > threshold


def speedup_interval(
    base_times: list[float], cand_times: list[float], confidence: float = 0.95
) -> SpeedupInterval:
    """Speedup of the candidate over the baseline with a Welch-t confidence interval on log-times.

    Pass one value per run (each run's median step time) so the run-to-run noise is in the sample;
    per-step times of a single run give only the within-run interval, which is too narrow.
    """
    _z(confidence)
    for name, xs in (("base_times", base_times), ("cand_times", cand_times)):
        if len(xs) < 2:
            raise ValueError(f"{name} needs at least 2 samples for an interval, got {len(xs)}")
        if any(not (x > 0 and math.isfinite(x)) for x in xs):
            raise ValueError(f"{name} must be positive finite times")
    lb = [math.log(x) for x in base_times]
    lc = [math.log(x) for x in cand_times]
    diff = statistics.fmean(lb) - statistics.fmean(lc)
    vb = statistics.variance(lb) / len(lb)
    vc = statistics.variance(lc) / len(lc)
    se = math.sqrt(vb + vc)
    point = math.exp(diff)
    if se == 0:
        return SpeedupInterval(point, point, point)
    df = (vb + vc) ** 2 / (vb**2 / (len(lb) - 1) + vc**2 / (len(lc) - 1))
    half = t_quantile(0.5 + confidence / 2, df) * se
    return SpeedupInterval(point, _exp(diff - half), _exp(diff + half))


NOISIER_LEVEL = 0.95
"""A candidate whose own spread exceeds the pool's beyond this F-test level is not given the pool's
precision (:func:`pooled_speedup_interval`)."""


@dataclass(frozen=True, slots=True)
class SpreadPrior:
    """The relative spread doctor expects of one measurement (a verification round's job time:
    ``DoctorReport.round_cv``), believed as ``df`` degrees of freedom (doctor's baseline runs less
    one). A pooled variance of ``d`` degrees of freedom is moderated toward it, ``(df·cv² + d·s²) /
    (df + d)`` on ``df + d`` degrees of freedom: the scaled-inverse-chi-square posterior that
    limma's moderated t uses, so a few rounds neither shrink an interval by agreeing by chance nor
    leave it t's width at two degrees of freedom."""

    cv: float
    df: int


def pooled_speedup_interval(base_times: list[float], cand_times: list[float], confidence: float = 0.95,
                            others: tuple[list[float], ...] = (),
                            prior: SpreadPrior | None = None) -> SpeedupInterval:
    """Speedup of the candidate over the baseline, its log-time variance pooled over the baseline,
    the candidate and ``others`` (every other arm measured in the same rounds, each about its own
    mean: one-way analysis of variance's error term, with t at the pool's degrees of freedom), and
    moderated toward ``prior`` when given.

    The pool assumes the arms share one spread, which interleaved runs of one job on one machine
    mostly do; a candidate whose own variance is larger than the rest's beyond an F test at
    ``NOISIER_LEVEL`` gets Welch's interval on its own spread (:func:`speedup_interval`), so a
    noisy candidate never borrows the baseline's precision. With ``prior`` that interval is
    moderated too: the baseline's side takes the rest's pool, the candidate's its own variance
    moderated toward the prior (limma's posterior, one arm at a time), so two wild rounds give a
    wide interval at the degrees of freedom the prior adds, not t at one (issue 49's A/A campaign
    12 printed [0.000, 1.2e10])."""
    welch = speedup_interval(base_times, cand_times, confidence)
    groups = [[math.log(x) for x in g] for g in (base_times, cand_times, *others) if len(g) >= 2]
    df = sum(len(g) - 1 for g in groups)
    ss = sum((x - statistics.fmean(g)) ** 2 for g in groups for x in g)
    prior_df, prior_var = (prior.df, prior.cv ** 2) if prior is not None and prior.df > 0 and prior.cv > 0 else (0, 0.0)
    df, ss = df + prior_df, ss + prior_df * prior_var
    cand_df = len(cand_times) - 1
    rest_df = df - cand_df
    if ss == 0 or rest_df < 1:
        return welch
    cand_var = statistics.variance([math.log(x) for x in cand_times])
    rest_var = (ss - cand_var * cand_df) / rest_df
    q = 0.5 + confidence / 2
    if rest_var <= 0 or cand_var / rest_var > _f_quantile(NOISIER_LEVEL, cand_df, rest_df):
        if not prior_df or rest_var <= 0:
            return welch
        cand_var = (prior_df * prior_var + cand_df * cand_var) / (prior_df + cand_df)
        vb, vc = rest_var / len(base_times), cand_var / len(cand_times)
        welch_df = (vb + vc) ** 2 / (vb ** 2 / rest_df + vc ** 2 / (prior_df + cand_df))
        half = t_quantile(q, welch_df) * math.sqrt(vb + vc)
    else:
        half = t_quantile(q, df) * math.sqrt(ss / df * (1 / len(base_times) + 1 / len(cand_times)))
    diff = math.log(welch.point)
    return SpeedupInterval(welch.point, _exp(diff - half), _exp(diff + half))


def futile(interval: SpeedupInterval, rounds: int, most: int, confidence: float, floor: float,
           final_confidence: float | None = None) -> bool:
    """Whether ``most`` measured rounds could not clear ``floor`` even if the point estimate after
    ``rounds`` held: the interval (at ``confidence``) is projected to ``most`` rounds (judged at
    ``final_confidence``, by default the same), its half-width (on log-times) shrinking with the
    square root of the samples and with t's quantile. Both are estimated generously (t at the
    fewest degrees of freedom now, the most later), so a candidate still in reach is never dropped;
    stopping for futility only ever withholds a promotion, so the interval's confidence holds."""
    if rounds >= most or interval.point <= floor:
        return True
    half = math.log(interval.point) - math.log(interval.low)
    now, last = 0.5 + confidence / 2, 0.5 + (final_confidence or confidence) / 2
    shrink = math.sqrt(rounds / most) * t_quantile(last, 2 * most - 2) / t_quantile(now, max(1, rounds - 1))
    return interval.point * math.exp(-half * shrink) <= floor


@dataclass(kw_only=True, slots=True)
class LossSpread:
    """The baseline's loss trajectory, its spread, and the tolerances chosen from it."""

    reference: list[float]
    """Per-step mean loss of the same-seed repeats, every step."""
    spread: list[float]
    """Per step, the largest minus the smallest loss over all runs that reached it."""
    max_deviation: float
    """Largest |loss − reference| in the first K steps over every run, reassociation runs included."""
    compare_steps: int
    tolerance: float
    numerics_tolerance: float
    rule: str
    """The rule in words, with its numbers, for the report."""

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> LossSpread:
        return cls(**data)


def loss_tolerance(
    repeats: list[list[float]], compare_steps: int, reassociated: Sequence[list[float]] = ()
) -> LossSpread:
    """Reference losses and tolerances from same-seed repeats and runs that only reorder float sums."""
    if not repeats:
        raise ValueError("no baseline losses")
    steps = min(len(r) for r in repeats)
    if steps < compare_steps:
        raise ValueError(f"the baseline logged {steps} losses, fewer than the {compare_steps} the contract compares")
    runs = [list(r[:steps]) for r in repeats]
    if any(not math.isfinite(x) for r in runs + list(reassociated) for x in r):
        raise ValueError("the baseline's loss is NaN or infinite: it has no trajectory to compare against")
    reference = [statistics.fmean(col) for col in zip(*runs, strict=True)]
    everything = runs + [list(r[:steps]) for r in reassociated]
    spread = []
    for i in range(steps):
        col = [r[i] for r in everything if i < len(r)]
        spread.append(max(col) - min(col))
    max_dev = max(
        (abs(r[i] - reference[i]) for r in everything for i in range(min(compare_steps, len(r)))), default=0.0
    )
    scale = max(abs(x) for x in reference[:compare_steps])
    floor = LOSS_REL_FLOOR * scale
    tolerance = max(LOSS_SAFETY * max_dev, floor)
    numerics = max(tolerance, NUMERICS_REL * scale)
    rule = (
        f"tolerance = max({LOSS_SAFETY:g} × largest deviation in the first {compare_steps} steps "
        f"({max_dev:.3g}, over {len(runs)} same-seed and {len(reassociated)} reassociation runs), "
        f"{LOSS_REL_FLOOR:g} × loss ({floor:.3g})) = {tolerance:.3g}; "
        f"numerics-by-design tolerance = {NUMERICS_REL:g} × loss = {numerics:.3g}"
    )
    return LossSpread(
        reference=reference,
        spread=spread,
        max_deviation=max_dev,
        compare_steps=compare_steps,
        tolerance=tolerance,
        numerics_tolerance=numerics,
        rule=rule,
    )


def _exp(x: float) -> float:
    """An interval's bound: t at one or two degrees of freedom and a high level can be thousands of
    standard errors wide, beyond what a float's exponent holds."""
    return math.exp(max(-700.0, min(700.0, x)))


def _f_quantile(q: float, dfn: float, dfd: float) -> float:
    from scipy import stats

    return float(stats.f.ppf(q, dfn, dfd))


def t_quantile(q: float, df: float) -> float:
    """Student's t quantile. scipy is imported here: a second of import that reading a record
    (doctor.json's noise) never needs."""
    from scipy import stats

    return float(stats.t.ppf(q, df))
