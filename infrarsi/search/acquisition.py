"""Choosing the next trial: expected improvement of the projected job time x P(fits in memory)
x P(runs: no setting of it breaks the job).

Both in log space: the improvement is a ratio, so a 10% gain counts the same on a 1 s job as on
a 1 h job. When the candidate the time model likes best is predicted to OOM, the search pairs it
with memory savers instead of walking away from it: among the variants that only move settings
to cheaper-in-memory values, it takes the one predicted to fit at the least time cost.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.special import ndtr

from infrarsi.search.memory_guard import HUNGRIER, dim_membership, dim_prices
from infrarsi.search.memory_model import MemoryModel
from infrarsi.search.space import SearchSpace
from infrarsi.search.time_model import TimePrediction

MIN_GAIN = math.log(1.01)
"""A gain in log job time worth a trial: what re-verification's interval must clear to promote
(``noise.PROMOTION_FLOOR``, 1%); a smaller one could never be shown."""


@dataclass(frozen=True, slots=True)
class Scores:
    """Everything the acquisition knows about each row of a candidate indicator matrix."""

    time: TimePrediction
    p_fits: np.ndarray
    ei: np.ndarray
    p_runs: np.ndarray
    """P(no setting breaks it: ``crash_model``)."""

    @property
    def value(self) -> np.ndarray:
        return self.ei * self.p_fits * self.p_runs


def expected_improvement(mean: np.ndarray, sd: np.ndarray, best: float) -> np.ndarray:
    """E[max(best - Y, 0)] for Y ~ N(mean, sd): improvement below ``best`` (minimisation)."""
    sd = np.maximum(sd, 1e-9)
    z = (best - mean) / sd
    return (best - mean) * ndtr(z) + sd * np.exp(-0.5 * z**2) / math.sqrt(2 * math.pi)


def p_gain(time: TimePrediction, best_log_job: float, gain: float = MIN_GAIN) -> np.ndarray:
    """P(log job time < ``best_log_job`` - ``gain``) on the time model's posterior: the chance a
    candidate beats the best by more than ``gain``."""
    return ndtr((best_log_job - gain - time.log_job) / np.maximum(time.log_job_sd, 1e-9))


def score(time: TimePrediction, p_fits: np.ndarray, best_log_job: float, p_runs: np.ndarray | None = None) -> Scores:
    return Scores(time, p_fits, expected_improvement(time.log_job, time.log_job_sd, best_log_job),
                  np.ones_like(p_fits) if p_runs is None else p_runs)


def memory_saver_pair(
    space: SearchSpace,
    memory: MemoryModel,
    indicator: np.ndarray,
    scores: Scores,
    anchor: int,
    allowed: np.ndarray,
    min_p_fits: float = 0.5,
) -> int | None:
    """Row of the fastest allowed variant of ``anchor`` that only adds memory savers and fits.

    A variant qualifies when every dimension it changes (a knob, the coupled batch group, a
    patch) moves to a setting whose fitted memory price is lower than the anchor's by at least
    ``HUNGRIER``, and the memory model gives it P(fits) >= ``min_p_fits``. None when no variant qualifies.
    """
    effect, _ = memory.setting_effects()
    # Memory each candidate pays in each dimension, and whether it differs there from the anchor.
    paid = dim_prices(space, effect, indicator)
    changed = (indicator != indicator[anchor]) @ dim_membership(space) > 0
    cheaper = paid < paid[anchor] - HUNGRIER
    savers_only = changed.any(axis=1) & np.all(~changed | cheaper, axis=1)
    ok = savers_only & allowed & (scores.p_fits >= min_p_fits)
    if not ok.any():
        return None
    rows = np.flatnonzero(ok)
    return int(rows[np.argmin(scores.time.log_job[rows])])
