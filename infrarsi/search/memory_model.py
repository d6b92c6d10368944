"""Censored (Tobit) regression of log peak memory on the encoded settings, as a sum of two parts.

An OOM trial only tells us its peak was above the budget: it is a right-censored observation at
log(budget) (or at the level the watchdog saw, if higher). A trial that ended early for another
reason (crash, timeout, slow abort) before ``STEADY_STEPS`` steps ran part of the job, so the peak
it reached is a lower bound too; one that ran that many had reached the peak every later step
repeats, and its reading is a measurement. Fitting by censored likelihood lets OOMs teach the
model instead of being thrown away; the coefficients are each setting's memory price.

The weights get a weak Gaussian prior toward the prior effects (their sds widened by
``prior_weakening``, correlations between a knob's columns kept), the intercept a vague one, and
log sigma a weak one so a handful of points cannot collapse the noise to zero. Parameter
uncertainty comes from the Laplace approximation.

A peak is the state plus the activations (``infrarsi.priors.memory_parts``): a setting whose prior
names a part scales that part only, every other one both, each part log-additive, so
``log peak = c + log((1 - s)·exp(x·w_state) + s·exp(x·w_activations))`` where ``s`` is the
activations' share at the baseline, fitted too. Micro-batch 8 then costs what the activations
weigh in the candidate, not at the baseline: little under full recomputation, most without it.
Where no setting names a part, both parts move together and the model is the additive one. On a
GPU cluster the layout's degrees also act on the parts together (under ZeRO, what tp·pp leaves to
shard over; with the model's shape known, what recomputation, tensor and sequence parallelism do to
the activations): ``PartInteractions`` adds those known offsets to each candidate's parts and, with
the shape, puts the activations' share at the baseline where the shape does.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np
from scipy.optimize import minimize
from scipy.special import expit, log_expit, ndtr

from infrarsi.priors.types import MAX_SD, PriorTable
from infrarsi.records import MemoryPriceRow
from infrarsi.search.effects import UNKNOWN_LOG_SD, SettingPriors, coefficient_prior, loosened, setting_priors
from infrarsi.search.memory_curve import refit_untried
from infrarsi.search.memory_guard import interaction
from infrarsi.search.part_interactions import PartInteractions
from infrarsi.search.space import SearchSpace
from infrarsi.search.truncated import mean_above, tail_terms
from infrarsi.trials import Candidate, TrialResult, TrialStatus

_SIGMA_BOUNDS = (math.log(0.02), math.log(0.25))
"""A peak repeats within a few percent (doctor's repeats here: 0.55-0.58 GiB), so sigma never
claims less than 2%, which would make a candidate one percent under the budget a sure fit; and
never more than 25%, which would let the fit explain OOMs its prior did not expect as noise and
make every candidate a coin flip on memory."""
_SIGMA_PRIOR = (math.log(0.1), 1.0)
"""log sigma ~ N(log 0.1, 1): peaks repeat within ~10%, give or take an e-fold."""
_INTERCEPT_SD = 10.0
PART_COLUMN_SD = MAX_SD
"""The vague prior of a feature column that moves one part only."""
_SHARE_SD = 1.0
"""The activations' share at the baseline, in logit: the priors' implied share, give or take an e-fold."""
SHAPED_SHARE_SD = 0.3
"""...and the share the model's shape gives (``baseline_activation_share``): the runtime's buffers,
the logits and an MoE's routed copies are not in it."""


STEADY_STEPS = 2
"""Steps after which a run has met its peak: the first step's optimizer call allocates the
optimizer's state after the activations are freed, the second holds both. On the README job a
bf16 trial aborted slow after a few steps peaked at 0.38 GiB against the baseline's 0.45; read as
a lower bound and moved up to where the prior put it, it priced bf16 at +0.63 in log memory and
kept every bf16 candidate without SDPA from the search (docs/benchmarks.md, "The README job five
times")."""


@dataclass(frozen=True, slots=True)
class MemoryPrice:
    key: str
    log_effect: float
    """Fitted log change of the peak against the baseline."""
    log_sd: float
    pct: float
    """The same as a percentage change of the peak."""
    bytes_at_baseline: float
    """The same in bytes, at the baseline's predicted peak."""

    def row(self) -> MemoryPriceRow:
        """As ``run.json`` keeps it and the report shows it."""
        return MemoryPriceRow(**asdict(self))


@dataclass(frozen=True, slots=True)
class MemoryData:
    """Encoded observations: log peak, or a lower bound on it where ``censored``."""

    indicator: np.ndarray
    y: np.ndarray
    censored: np.ndarray


def memory_data(space: SearchSpace, history: list[TrialResult]) -> MemoryData:
    trials: list[Candidate] = []
    ys: list[float] = []
    cens: list[bool] = []
    budget = math.log(space.budget_bytes)
    for t in history:
        if t.status is TrialStatus.OOM:
            level = math.log(t.peak_bytes) if t.peak_bytes else -math.inf
            trials.append(t.candidate)
            ys.append(max(budget, level))
            cens.append(True)
        elif t.peak_bytes:
            steady = len(t.warmup_times) + len(t.step_times) >= STEADY_STEPS
            trials.append(t.candidate)
            ys.append(math.log(t.peak_bytes))
            cens.append(not (t.ok or steady))
    return MemoryData(space.indicator(trials), np.array(ys), np.array(cens, dtype=bool))


@dataclass(frozen=True, slots=True)
class PeakParts:
    """Which part of the peak each setting and feature column scales, the settings' effects on
    their part, and the prior on the activations' share at the baseline."""

    setting_part: np.ndarray
    """Per ``space.setting_keys``: "state", "activations" or "" (the whole peak)."""
    mean: np.ndarray
    sd: np.ndarray
    shared_sd: np.ndarray
    """Of ``sd``, what the setting shares with its knob's other values (``Prior.mem_part_shared_sd``)."""
    state_cols: np.ndarray
    """Per feature column: 1 where it moves the state (its knob names no part, or the state)..."""
    act_cols: np.ndarray
    """...and where it moves the activations."""
    share_logit: float
    share_sd: float = _SHARE_SD

    @property
    def parted(self) -> np.ndarray:
        return self.setting_part != ""

    @property
    def parted_cols(self) -> np.ndarray:
        return (self.state_cols * self.act_cols) == 0


def peak_parts(space: SearchSpace, priors: PriorTable, known_share: float | None = None) -> PeakParts:
    """The parts ``priors`` name (``Prior.mem_part``) for ``space``'s settings and columns: a knob
    with a part for any value moves that part only; the activations' share at the baseline is
    ``known_share`` where the shape gave one, else what the priors' whole and part effects imply."""
    n = len(space.setting_keys)
    part, mean, sd, shared = np.full(n, "", dtype=object), np.zeros(n), np.full(n, UNKNOWN_LOG_SD), np.zeros(n)
    implied = []
    for i, key in enumerate(space.setting_keys):
        prior = priors.get(key) if key in priors else None
        if prior is None or not prior.mem_part:
            continue
        part[i], mean[i], sd[i] = prior.mem_part, prior.mem_part_log_mean, prior.mem_part_log_sd
        shared[i] = prior.mem_part_shared_sd
        # The whole-peak belief is the part's at the share the source assumed: (1-s) + s·e^part.
        whole, own = math.expm1(prior.mem_log_mean), math.expm1(prior.mem_part_log_mean)
        if abs(whole) > 0.1 and abs(own) > 0.2 and 0 < whole / own < 1:
            implied.append(whole / own if prior.mem_part == "activations" else 1 - whole / own)
    knob_part = {space.knob_of(k): p for k, p in zip(space.setting_keys, part, strict=True) if p}
    for i, key in enumerate(space.setting_keys):
        if not part[i] and space.knob_of(key) in knob_part:
            part[i] = knob_part[space.knob_of(key)]  # a value no rule priced: its part, no belief
    cols = [knob_part.get(c.dim, "") for c in space.columns]
    if known_share is not None:
        share = float(np.clip(known_share, 0.01, 0.99))
    else:
        share = float(np.clip(np.median(implied), 0.05, 0.95)) if implied else 0.5
    return PeakParts(part.astype(str), mean, sd, shared, np.array([c != "activations" for c in cols], dtype=float),
                     np.array([c != "state" for c in cols], dtype=float), math.log(share / (1 - share)),
                     SHAPED_SHARE_SD if known_share is not None else _SHARE_SD)


class MemoryModel:
    def __init__(self, space: SearchSpace, priors: PriorTable | None = None, *, prior_weakening: float = 2.0,
                 interactions: PartInteractions | None = None):
        """``interactions``: the layout's known offsets to the parts and the shape's activations share
        (``part_interactions``)."""
        self.space = space
        self.interactions = interactions
        self.priors = priors or PriorTable()
        self.prior_weakening = prior_weakening
        self.setting_prior = setting_priors(space, self.priors, "mem")
        """Whole-peak effects: what a trial's data are checked against."""
        self.parts = peak_parts(space, self.priors, None if interactions is None else interactions.share)
        self._use_prior(self._model_prior(self.setting_prior))
        self.contradicted: set[str] = set()
        """Settings whose memory prior the data contradict: it stops steering (as in the time model)."""
        self.fitted = False
        self.data: MemoryData | None = None
        self._theta: np.ndarray | None = None
        """The last fit's parameters: refitting on one more trial starts there (few iterations)."""

    # --- fitting ---------------------------------------------------------------------------

    def _use_prior(self, prior: SettingPriors) -> None:
        # A part's effects are large (no recomputation: e^3 the activations), and the columns'
        # vague prior would halve them.
        mean, precision = coefficient_prior(self.space, prior, np.where(self.parts.parted_cols, PART_COLUMN_SD,
                                                                         UNKNOWN_LOG_SD))
        self.prior_mean = mean
        self.prior_precision = precision / self.prior_weakening**2

    def _model_prior(self, whole: SettingPriors, loose: np.ndarray | None = None) -> SettingPriors:
        """The settings' priors as the weights read them: a parted setting's is its effect on its
        part (unknown where no rule priced it), unless ``loose`` says the data contradicted it."""
        use = self.parts.parted if loose is None else self.parts.parted & ~loose
        return SettingPriors(np.where(use, self.parts.mean, whole.mean), np.where(use, self.parts.sd, whole.sd),
                             whole.known | use, np.where(use, self.parts.shared_sd, 0.0))

    def fit(self, history: list[TrialResult]) -> MemoryModel:
        data = self.data = memory_data(self.space, history)
        if len(data.y) == 0:
            self.fitted = False
            return self
        X = data.indicator @ self.space.setting_deltas
        offsets = self._offsets(data.indicator)
        self._use_prior(self._revised_prior(data, X, offsets))
        y, censored = data.y.copy(), data.censored
        if censored.any() and (~censored).any():
            # An OOM says only "above the budget"; fitted as such, the mode sits on the budget and
            # every variant that saves a little looks likely to fit, trial after trial. As the
            # time model does for slow aborts, the bound moves up to where the peak most likely is:
            # E[peak | peak > bound] under a fit of the measured peaks and the prior.
            observed = self.fit_arrays(X[~censored], y[~censored], censored[~censored], offsets[~censored])
            mean, sd = observed.predict(X[censored], data.indicator[censored])
            y[censored] = mean_above(mean, sd, y[censored])
        return self.fit_arrays(X, y, censored, offsets)

    def _offsets(self, indicator: np.ndarray) -> np.ndarray:
        """(rows, 2): the state and activations parts' offsets of ``indicator``'s rows (zero without
        ``interactions``)."""
        return np.zeros((len(indicator), 2)) if self.interactions is None else self.interactions.offsets(indicator)

    def _revised_prior(self, data: MemoryData, X: np.ndarray, offsets: np.ndarray) -> SettingPriors:
        """The setting priors, revised by a data-only fit (on ``data``, encoded as ``X``): those it contradicts (the rule of
        ``prior_check``) lose their mean and widen to hold what the data show (every compile=True
        trial OOMing while compile's prior says "no memory change" must move compile's price, not
        spread the blame over micro-batch and patches); and a power-of-two knob's untried values
        follow its curve through the measured ones (``memory_curve``). A parted setting keeps its
        part's prior: the data-only fit is additive, so where the parts' mix moves (micro-batch
        under recomputation and without) it would call the structure wrong, and the mix is fitted."""
        self.contradicted = set()
        data_only = MemoryModel(self.space, interactions=self.interactions)
        effects, sds = data_only.fit_arrays(X, data.y, data.censored, offsets).setting_effects()
        revised, hit = loosened(self.setting_prior, data.indicator, effects, sds, known_only=True)
        self.contradicted = {k for k, h in zip(self.space.setting_keys, hit, strict=True) if h}
        revised = self._model_prior(revised, hit & ~self.parts.parted)
        # The curve goes through effects fitted with the other settings' priors: trials that move
        # several knobs at once leave a data-only fit unable to tell their prices apart.
        self._use_prior(revised)
        effects, sds = self.fit_arrays(X, data.y, data.censored, offsets).setting_effects()
        mean, sd, known = revised.mean.copy(), revised.sd.copy(), revised.known.copy()
        peaks = data.indicator[~data.censored].sum(axis=0) > 0
        # A parted knob's untried values follow from its part, whose share the fit holds.
        curved = np.where(self.parts.parted, 0.0, self.space.setting_log2)
        curve = refit_untried(mean, sd, known, [self.space.knob_of(k) for k in self.space.setting_keys],
                              curved, peaks, effects, sds)
        return SettingPriors(mean, sd, known, revised.shared_sd).without_shared(curve)

    def _unpack(self, theta: np.ndarray) -> tuple[float, float, np.ndarray, float]:
        """Intercept (log peak at the baseline), activations' share in logit, weights, log sigma."""
        return theta[0], theta[1], theta[2:-1], theta[-1]

    def _mean_jac(self, params: np.ndarray, X: np.ndarray, offsets: np.ndarray | None = None
                  ) -> tuple[np.ndarray, np.ndarray]:
        """Log peak of each row of ``X`` under ``params`` (theta without log sigma), and its
        Jacobian in them; ``offsets`` move the rows' parts (``PartInteractions``)."""
        c, q, w = params[0], params[1], params[2:]
        state = log_expit(-q) + X @ (w * self.parts.state_cols) + (0.0 if offsets is None else offsets[:, 0])
        act = log_expit(q) + X @ (w * self.parts.act_cols) + (0.0 if offsets is None else offsets[:, 1])
        total = np.logaddexp(state, act)
        to_state, to_act = np.exp(state - total), np.exp(act - total)
        jac = np.column_stack([np.ones(len(X)), to_act - expit(q),
                               X * (to_state[:, None] * self.parts.state_cols + to_act[:, None] * self.parts.act_cols)])
        return c + total, jac

    def _objective(self, theta: np.ndarray, X: np.ndarray, y: np.ndarray, censored: np.ndarray, b0: float,
                   offsets: np.ndarray | None) -> tuple[float, np.ndarray]:
        b, q, w, s = self._unpack(theta)
        sigma = math.exp(s)
        z, jac = self._mean_jac(theta[:-1], X, offsets)
        obs = ~censored
        r = (y[obs] - z[obs]) / sigma
        a = (y[censored] - z[censored]) / sigma
        tail_nll, mills = tail_terms(a)
        nll = obs.sum() * s + 0.5 * (r @ r) + tail_nll.sum()
        d_z = np.zeros_like(z)
        d_z[obs] = -r / sigma
        d_z[censored] = -mills / sigma
        d_s = (obs.sum() - r @ r) - (mills @ a)

        s0, s_sd = _SIGMA_PRIOR
        dw = w - self.prior_mean
        prior_grad = self.prior_precision @ dw
        q_off, share_sd = q - self.parts.share_logit, self.parts.share_sd
        nll += (0.5 * dw @ prior_grad + 0.5 * ((b - b0) / _INTERCEPT_SD) ** 2 + 0.5 * (q_off / share_sd) ** 2
                + 0.5 * ((s - s0) / s_sd) ** 2)
        grad = jac.T @ d_z
        grad[0] += (b - b0) / _INTERCEPT_SD**2
        grad[1] += q_off / share_sd**2
        grad[2:] += prior_grad
        return nll, np.append(grad, d_s + (s - s0) / s_sd**2)

    def fit_arrays(self, X: np.ndarray, y: np.ndarray, censored: np.ndarray,
                   offsets: np.ndarray | None = None) -> MemoryModel:
        """Fit on encoded features ``X`` and log peaks ``y`` (lower bounds where ``censored``), the
        rows' state parts moved by ``offsets``."""
        censored = np.asarray(censored, dtype=bool)
        b0 = float(np.mean(y))
        theta0 = self._theta if self._theta is not None and len(self._theta) == X.shape[1] + 3 else \
            np.concatenate([[b0, self.parts.share_logit], self.prior_mean, [_SIGMA_PRIOR[0]]])
        bounds = [(None, None)] * (2 + X.shape[1]) + [_SIGMA_BOUNDS]
        res = minimize(
            self._objective, theta0, args=(X, y, censored, b0, offsets), jac=True, method="L-BFGS-B", bounds=bounds
        )
        self._theta = res.x
        self.intercept, _, _, log_sigma = self._unpack(res.x)
        self.sigma = math.exp(log_sigma)
        self.cov = self._laplace_cov(X, y, censored, res.x, offsets)
        self.fitted = True
        return self

    def _laplace_cov(self, X: np.ndarray, y: np.ndarray, censored: np.ndarray, theta: np.ndarray,
                     offsets: np.ndarray | None) -> np.ndarray:
        """Covariance of (intercept, share, weights): the inverse Gauss-Newton Hessian of the
        negative log posterior."""
        z, jac = self._mean_jac(theta[:-1], X, offsets)
        a = (y[censored] - z[censored]) / self.sigma
        _, mills = tail_terms(a)
        h = np.full(len(y), 1.0 / self.sigma**2)
        h[censored] = mills * (mills - a) / self.sigma**2
        prior_prec = np.zeros((jac.shape[1], jac.shape[1]))
        prior_prec[0, 0] = 1.0 / _INTERCEPT_SD**2
        prior_prec[1, 1] = 1.0 / self.parts.share_sd**2
        prior_prec[2:, 2:] = self.prior_precision
        return np.linalg.inv(jac.T @ (jac * h[:, None]) + prior_prec)

    # --- predictions -----------------------------------------------------------------------

    def predict(self, X: np.ndarray, indicator: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Log peak mean and predictive sd (noise plus parameter uncertainty); with the rows'
        ``indicator``, the layout's interactions count too."""
        assert self._theta is not None  # fitted
        mean, jac = self._mean_jac(self._theta[:-1], X, None if indicator is None else self._offsets(indicator))
        return mean, np.sqrt(self.sigma**2 + np.einsum("ij,jk,ik->i", jac, self.cov, jac))

    def p_fits(self, X: np.ndarray, budget_bytes: float, indicator: np.ndarray | None = None) -> np.ndarray:
        """P(peak <= budget) for each encoded row; 1 when nothing is known yet. With the rows'
        ``indicator``, the model's misfit at the measured peaks nearby moves the row's prediction,
        and a row far from every measured peak is less sure (``interaction``)."""
        if not self.fitted:
            return np.ones(len(X))
        mean, sd = self.predict(X, indicator)
        if indicator is not None and self.data is not None:
            peaks = ~self.data.censored
            measured = self.data.indicator[peaks]
            residuals = self.data.y[peaks] - self.predict(measured @ self.space.setting_deltas, measured)[0]
            shift, var = interaction(self.space, indicator, measured, residuals)
            mean, sd = mean + shift, np.sqrt(sd**2 + var)
        return ndtr((math.log(budget_bytes) - mean) / sd)

    def setting_effects(self) -> tuple[np.ndarray, np.ndarray]:
        """Fitted log effect on the baseline's peak and its sd for every ``space.setting_keys`` entry."""
        assert self._theta is not None  # fitted
        params = self._theta[:-1]
        # Each setting alone, its known offsets included (tensor parallelism's on the activations).
        alone = self._offsets(np.eye(len(self.space.setting_keys)))
        mean, jac = self._mean_jac(params, self.space.setting_deltas, alone)
        base, base_jac = self._mean_jac(params, np.zeros((1, self.space.n_features)))
        diff = jac - base_jac
        return mean - base, np.sqrt(np.einsum("ij,jk,ik->i", diff, self.cov, diff))

    def prices(self) -> list[MemoryPrice]:
        effect, sd = self.setting_effects()
        baseline = math.exp(self.intercept)
        return [
            MemoryPrice(key, float(e), float(s), 100.0 * math.expm1(e), baseline * math.expm1(e))
            for key, e, s in zip(self.space.setting_keys, effect, sd, strict=True)
        ]
