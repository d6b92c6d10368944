"""Judging one prior against live trials: each setting's observed effect against what it said.

The observed effect comes from the data alone (a Bayesian ridge on the setting indicators for time;
the memory model's weakly-regularised Tobit fit for memory), so a prior cannot vouch for itself. A
prior is miscalibrated when the observed effect lies outside its ~95% band (z > 2, on the prior's
and the data's sds together) and there is enough data to say so: the setting was seen on at least
``MIN_SUPPORT`` times, and off as often, or once when doctor measured the baseline's run-to-run
noise (its repeated baseline runs are the support, and that noise floors the data's sd: one trial
is one noisy sample). One trial with the setting on is enough when it lies far outside
(z > ``SINGLE_TRIAL_Z``): the first bf16 trial running 10x slower than a prior that promised
1.35x faster needs no second one to make the point.

A tight prior is judged like any other: the check once also asked the data to pin the effect down
better than the prior did, which made an overconfident prior (a bank finding's ±2% band) immune
to every measurement, and a ×1.15 prior met by ×0.77 over two trials read "consistent".
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from sklearn.linear_model import BayesianRidge

from infrarsi.priors.types import Prior, PriorTable
from infrarsi.records import PriorCheckRow

Z_BAND = 2.0
MIN_SUPPORT = 2
SINGLE_TRIAL_Z = 4.0


@dataclass(frozen=True, slots=True)
class PriorCheck:
    key: str
    quantity: str
    """time | memory"""
    prior: Prior
    observed: float
    """Log effect the data show."""
    observed_sd: float
    n_trials: int
    """Observations that held the setting."""
    miscalibrated: bool

    @property
    def prior_mean(self) -> float:
        return self.prior.time_log_mean if self.quantity == "time" else self.prior.mem_log_mean

    @property
    def prior_sd(self) -> float:
        return self.prior.time_log_sd if self.quantity == "time" else self.prior.mem_log_sd

    @property
    def z(self) -> float:
        return abs(self.observed - self.prior_mean) / math.hypot(self.prior_sd, self.observed_sd)

    def row(self) -> PriorCheckRow:
        """As ``run.json`` keeps it and the report shows it."""
        return PriorCheckRow(key=self.key, quantity=self.quantity, prior=self.prior.to_dict(),
                             prior_mean=self.prior_mean, prior_sd=self.prior_sd, source=self.prior.source,
                             observed=self.observed, observed_sd=self.observed_sd, z=self.z,
                             n_trials=self.n_trials, miscalibrated=self.miscalibrated)


def judge(key: str, quantity: str, prior: Prior, observed: float, observed_sd: float,
          n_with: int, n_without: int, *, noise_cv: float | None = None) -> PriorCheck:
    check = PriorCheck(key, quantity, prior, observed, observed_sd, n_with, False)
    hit = contradicts(check.prior_mean, check.prior_sd, observed, observed_sd, n_with, n_without,
                      noise_cv=noise_cv)
    return PriorCheck(key, quantity, prior, observed, observed_sd, n_with, bool(hit))


def contradicts(mean: float | np.ndarray, sd: float | np.ndarray, observed: float | np.ndarray,
                observed_sd: float | np.ndarray, n_with: int | np.ndarray, n_without: int | np.ndarray, *,
                noise_cv: float | None = None) -> np.ndarray:
    """The rule of this module, elementwise on arrays or on scalars (then a numpy bool). ``noise_cv``: doctor's
    run-to-run CV when it measured one (the baseline then needs one trial of support, not two)."""
    z = np.abs(observed - mean) / np.hypot(sd, observed_sd)
    bar = np.where(np.asarray(n_with) >= MIN_SUPPORT, Z_BAND, SINGLE_TRIAL_Z)
    without = 1 if noise_cv else MIN_SUPPORT
    return (np.asarray(n_with) >= 1) & (np.asarray(n_without) >= without) & (z > bar)


def noise_floored(sds: np.ndarray, indicator: np.ndarray, noise_cv: float | None) -> np.ndarray:
    """The data-only sds, never below what run-to-run noise allows a difference of means of
    ``n_with`` and ``n_without`` trials: a ridge through three points can claim ±0.2% where each
    trial alone is only good to doctor's CV."""
    if not noise_cv or len(indicator) == 0:
        return sds
    n_with = indicator.sum(axis=0)
    n_without = len(indicator) - n_with
    with np.errstate(divide="ignore"):
        floor = noise_cv * np.sqrt(1.0 / np.maximum(n_with, 1) + 1.0 / np.maximum(n_without, 1))
    return np.maximum(sds, floor)


def check_all(keys: list[str], priors: PriorTable, quantity: str, indicator: np.ndarray,
              effects: np.ndarray, sds: np.ndarray, *, noise_cv: float | None = None) -> list[PriorCheck]:
    """One check per setting that has a prior, given the data-only effects of every setting (their
    sds already floored by ``noise_floored`` where the noise is known)."""
    n_with = indicator.sum(axis=0).astype(int)
    out = []
    for j, key in enumerate(keys):
        if key in priors:
            out.append(judge(key, quantity, priors.get(key), float(effects[j]), float(sds[j]),
                             int(n_with[j]), len(indicator) - int(n_with[j]), noise_cv=noise_cv))
    return out


def data_only_effects(indicator: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per-setting log effects and sds from the observations alone (no prior on the effects' sign)."""
    if len(y) < 2 or indicator.shape[1] == 0:
        return np.zeros(indicator.shape[1]), np.full(indicator.shape[1], math.inf)
    ridge = BayesianRidge().fit(indicator, y)
    return ridge.coef_, np.sqrt(np.diag(ridge.sigma_))
