"""One global regression of log step time over all completed trials, with the prior as its mean.

mean(c)  = offset + sum of the prior log effects of c's settings (miscalibrated ones dropped)
kernel   = Bayesian linear part over the setting indicators, each scaled by its prior sd
           (so a setting the prior is sure about moves little, an unknown one freely); where the
           data contradict a setting's prior (a miscalibrated one, or a neutral one facing a
           20x effect) its mean is dropped and its sd widened to reach what the data show: a
           10x-slower bf16 must land in its own effect, not in an RBF part that would make every
           candidate uncertain
         + pairwise interactions: a zero-mean term per pair of settings, its sd from where the
           priors say two roles meet (``search.interactions``: bf16 x SDPA 0.5, any pair 0.05)
         + an RBF part with learned amplitude for what is left (three settings together…)
         + white noise (run-to-run spread)
A Gaussian process on the residuals to the prior mean (``gp.GP``); the linear part is the
conjugate "effect per setting" model, the pairs split what two settings do together between
their own effects and their interaction as the priors weigh them, so two slow trials of bf16, both
with SDPA, leave bf16 without SDPA open (as wide as the pair's sd) instead of condemning bf16
everywhere; the RBF lets the data add what is still not explained.

A slow-aborted or timed-out trial that reported step times is a right-censored observation (the
true step time is above what it showed): it enters at the conditional mean of the predictive
distribution above its bound. Start-up time gets its own small regression, because compilation
costs tens of seconds once and the projected job time is ``startup + planned_steps x step``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from sklearn.linear_model import BayesianRidge

from infrarsi.priors.types import PriorTable
from infrarsi.search.effects import loosened, prior_startup_s, setting_priors
from infrarsi.search.gp import DEFAULT_NOISE_FLOOR, GP
from infrarsi.search.interactions import PairKernel
from infrarsi.search.prior_check import PriorCheck, check_all, data_only_effects, noise_floored
from infrarsi.search.space import SearchSpace
from infrarsi.search.truncated import mean_above
from infrarsi.trials import Candidate, TrialResult, TrialStatus

_CENSORED = (TrialStatus.ABORTED_SLOW, TrialStatus.TIMEOUT)
TYPICAL_NOISE_CV = 0.05
"""The run-to-run noise the fit expects where doctor's CV is not given (the centre of the noise's
prior, ``gp.NOISE_PRIOR_SD`` wide; with a CV, the CV is the floor and there is no prior): this
project's quiet CPU runs spread 1-10%, its measured tables' 10-30%. Without it, the pair terms
explain every trial of a few exactly and the fit settles the noise at its floor."""


@dataclass(frozen=True, slots=True)
class TimePrediction:
    log_step: np.ndarray
    log_step_sd: np.ndarray
    startup_s: np.ndarray
    log_job: np.ndarray
    """log(startup + planned_steps x step): the projected real job."""
    log_job_sd: np.ndarray

    @property
    def step_s(self) -> np.ndarray:
        return np.exp(self.log_step)

    @property
    def job_s(self) -> np.ndarray:
        return np.exp(self.log_job)


@dataclass(frozen=True, slots=True)
class TimeData:
    indicator: np.ndarray
    y: np.ndarray
    """Log median step time; for censored rows, the log of the bound."""
    censored: np.ndarray


def time_data(space: SearchSpace, history: list[TrialResult]) -> TimeData:
    rows = [(t, t.step_time) for t in history if t.step_time and (t.ok or t.status in _CENSORED)]
    return TimeData(
        space.indicator([t.candidate for t, _ in rows]),
        np.array([math.log(step_time) for _, step_time in rows]),
        np.array([not t.ok for t, _ in rows], dtype=bool),
    )


class TimeModel:
    def __init__(self, space: SearchSpace, priors: PriorTable | None = None, *,
                 noise_floor: float = DEFAULT_NOISE_FLOOR, noise_cv: float | None = None,
                 interactions: bool = True):
        """``noise_floor``: the smallest run-to-run sd of log step time to assume (doctor's CV).
        ``noise_cv``: doctor's measured CV itself, when there is one: the prior checks hold each
        trial to it (``prior_check.noise_floored``). ``interactions``: with the pairwise terms
        (False: the additive model of before, for comparison)."""
        self.space = space
        self.pairs = PairKernel.of(space) if interactions else None
        self.noise_cv = noise_cv or None
        self.priors = priors or PriorTable()
        self.setting_prior = setting_priors(space, self.priors, "time")
        self._prior_startup = prior_startup_s(space, self.priors)
        self.fitted = False
        self.data: TimeData | None = None
        """What the last fit saw (censored rows at their conditional means)."""
        self.data_effects = np.zeros(len(space.setting_keys))
        """Each setting's log effect from the trials alone (``prior_check.data_only_effects``)."""
        self.checks: list[PriorCheck] = []
        self.miscalibrated: set[str] = set()
        self.priors_in_use = self.setting_prior
        """The setting priors the fit uses: contradicted ones loosened (see ``effects.loosened``)."""
        # Where doctor measured the noise its CV is the floor; where not, a typical one is expected.
        self._gp = GP(noise_floor=noise_floor, noise_center=None if noise_cv else TYPICAL_NOISE_CV)
        """Kept between fits: the next fit starts from the last hyperparameters (fast, stable)."""

    # --- fitting ---------------------------------------------------------------------------

    def _fit_gp(self, indicator: np.ndarray, y: np.ndarray, *, optimize: bool) -> None:
        prior_part = indicator @ self.priors_in_use.mean
        self.offset = float(np.mean(y - prior_part))
        self._indicator = indicator
        pairs = self.pairs.cross(indicator, indicator) if self.pairs is not None else None
        self._gp.fit(indicator * self.priors_in_use.sd, y - self.offset - prior_part, optimize=optimize, pairs=pairs)

    def _predict_log_step(self, indicator: np.ndarray, *, with_noise: bool = False) -> tuple[np.ndarray, np.ndarray]:
        cross = diag = None
        if self.pairs is not None:
            cross, diag = self.pairs.cross(indicator, self._indicator), self.pairs.diag(indicator)
        resid, sd = self._gp.predict(indicator * self.priors_in_use.sd, with_noise=with_noise,
                                     pairs_cross=cross, pairs_diag=diag)
        return self.offset + indicator @ self.priors_in_use.mean + resid, sd

    def fit(self, history: list[TrialResult]) -> TimeModel:
        data = time_data(self.space, history)
        ok = ~data.censored
        if not ok.any():
            self.fitted = False
            return self
        y = data.y.copy()
        self.miscalibrated, self.checks = set(), []
        self.priors_in_use = self.setting_prior
        if data.censored.any():
            # A first pass at the last hyperparameters is enough to place the censored points.
            self._fit_gp(data.indicator[ok], y[ok], optimize=False)
            mu, sd = self._predict_log_step(data.indicator[data.censored], with_noise=True)
            y[data.censored] = mean_above(mu, sd, data.y[data.censored])
        effects, sds = data_only_effects(data.indicator, y)
        sds = noise_floored(sds, data.indicator, self.noise_cv)
        self.data, self.data_effects = TimeData(data.indicator, y, data.censored), effects
        self.checks = check_all(self.space.setting_keys, self.priors, "time", data.indicator, effects, sds,
                                noise_cv=self.noise_cv)
        self.miscalibrated = {c.key for c in self.checks if c.miscalibrated}
        # Neutral priors too: a 20x effect must land in its own setting, whatever was believed.
        # The setting indicators carry no order, so a knob's untried values are loosened with it
        # (on the contradicted value's side of the default, for ordered knobs).
        self.priors_in_use, _ = loosened(self.setting_prior, data.indicator, effects, sds,
                                         knobs=[self.space.knob_of(k) for k in self.space.setting_keys],
                                         sides=self.space.setting_sides, noise_cv=self.noise_cv)
        self._fit_gp(data.indicator, y, optimize=True)
        self._fit_startup(history)
        self.fitted = True
        return self

    def _fit_startup(self, history: list[TrialResult]) -> None:
        """Start-up seconds add up (imports, then compilation): the prior's seconds per setting
        are the mean, a Bayesian ridge on the indicators learns what the trials say beyond it."""
        rows = [t for t in history if t.startup_s is not None]
        indicator = self.space.indicator([t.candidate for t in rows])
        resid = np.array([t.startup_s for t in rows]) - indicator @ self._prior_startup
        self._startup_base = float(np.mean(resid)) if rows else 0.0
        # A space without settings (every knob fixed, no patch validated) has nothing to learn.
        self._startup = BayesianRidge().fit(indicator, resid) if len(rows) >= 3 and indicator.shape[1] else None

    # --- predictions -----------------------------------------------------------------------

    def predict_indicator(self, indicator: np.ndarray) -> TimePrediction:
        log_step, sd = self._predict_log_step(indicator)
        extra = self._startup.predict(indicator) if self._startup is not None else self._startup_base
        startup = np.maximum(indicator @ self._prior_startup + extra, 0.0)
        steps = self.space.planned_steps * np.exp(log_step)
        job = startup + steps
        return TimePrediction(log_step, sd, startup, np.log(job), sd * steps / job)

    def predict(self, candidates: list[Candidate]) -> TimePrediction:
        return self.predict_indicator(self.space.indicator(candidates))
