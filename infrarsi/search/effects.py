"""Per-setting prior effects, and their form as priors on the models' feature coefficients."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from infrarsi.priors.types import NEUTRAL_TIME_SD, PriorTable
from infrarsi.search.prior_check import Z_BAND, contradicts
from infrarsi.search.space import SearchSpace

UNKNOWN_LOG_SD = NEUTRAL_TIME_SD
"""Spread given to a setting no source has an opinion on (the priors' neutral sd)."""
MIN_OWN_SD = 0.02
"""A setting's own sd beside what it shares with its knob's other values: the reference level
(no recomputation, sd 0 against itself) still leaves its values a little apart."""


@dataclass(frozen=True, slots=True)
class SettingPriors:
    """One entry per ``space.setting_keys``: prior mean and sd of the setting's log effect."""

    mean: np.ndarray
    sd: np.ndarray
    known: np.ndarray
    """True where the table had an entry."""
    shared_sd: np.ndarray | None = None
    """Of ``sd``, what a setting shares with its knob's other values (``Prior.mem_part_shared_sd``);
    None: the settings' priors are independent."""

    def without_shared(self, rows: np.ndarray) -> SettingPriors:
        """The same, ``rows`` no longer sharing: a prior the data contradicted, or a curve's."""
        if self.shared_sd is None:
            return self
        return SettingPriors(self.mean, self.sd, self.known, np.where(rows, 0.0, self.shared_sd))


def setting_priors(space: SearchSpace, priors: PriorTable, quantity: str) -> SettingPriors:
    """``quantity`` is ``time`` or ``mem``. Keys without an entry get mean 0, UNKNOWN_LOG_SD."""
    n = len(space.setting_keys)
    mean, sd, known = np.zeros(n), np.full(n, UNKNOWN_LOG_SD), np.zeros(n, dtype=bool)
    for i, key in enumerate(space.setting_keys):
        if key in priors:
            prior = priors.get(key)
            mean[i] = getattr(prior, f"{quantity}_log_mean")
            sd[i] = getattr(prior, f"{quantity}_log_sd")
            known[i] = True
    return SettingPriors(mean, sd, known)


def loosened(prior: SettingPriors, indicator: np.ndarray, effects: np.ndarray, sds: np.ndarray, *,
             known_only: bool = False, knobs: list[str] | None = None,
             sides: list[int] | None = None, noise_cv: float | None = None) -> tuple[SettingPriors, np.ndarray]:
    """``prior`` with every setting the data contradict (``prior_check``'s rule, on the data-only
    ``effects`` and ``sds``) loosened: its mean dropped, its sd widened to hold the effect seen.
    ``known_only`` leaves the neutral entries alone. Given ``knobs`` (each setting's knob), the
    values no trial has held of a knob contradicted at one value are loosened as far: a knob's
    priors come from one source's curve (micro-batch 16's from the same slope as 4 and 8), so
    where that curve is wrong the untried end of it is unknown, not known. Given ``sides`` too
    (``SearchSpace.setting_sides``), only the untried values on the contradicted value's side of
    the default: the default is measured, and the curve's other branch (micro-batch 1 and 2 when 8
    was contradicted) is a different regime the trials say nothing about. ``noise_cv``: doctor's
    run-to-run CV, when measured (see ``prior_check.contradicts``). Also returns which settings
    were loosened."""
    n_with = indicator.sum(axis=0)
    hit = contradicts(prior.mean, prior.sd, effects, sds, n_with, len(indicator) - n_with, noise_cv=noise_cv)
    if known_only:
        hit &= prior.known
    wide = np.maximum(UNKNOWN_LOG_SD, np.abs(effects) + Z_BAND * sds)
    if knobs is not None and hit.any():
        owner = np.array(knobs)
        side = np.array(sides) if sides is not None else np.zeros(len(owner), dtype=int)
        for j in np.flatnonzero(hit):
            untried = (owner == owner[j]) & (n_with == 0) & ((side == 0) | (side == side[j]))
            wide[untried] = np.maximum(wide[untried], wide[j])
            hit = hit | untried
    loose = SettingPriors(np.where(hit, 0.0, prior.mean), np.where(hit, wide, prior.sd), prior.known, prior.shared_sd)
    return loose.without_shared(hit), hit


def coefficient_prior(space: SearchSpace, prior: SettingPriors,
                      column_sd: float | np.ndarray = UNKNOWN_LOG_SD) -> tuple[np.ndarray, np.ndarray]:
    """Gaussian prior (mean, precision matrix) on the feature coefficients implied by the setting priors.

    Each setting's prior is a noisy observation of its row of ``setting_deltas`` (weights
    1/sd^2); every column also gets a vague N(0, UNKNOWN_LOG_SD^2). Several columns describe one
    knob (a log2 trend plus one-hot deviations), so their coefficients are strongly correlated:
    the full precision keeps each setting's prior as tight as its source said, where independent
    per-column sds would add up to a far wider one. ``column_sd`` is that vague sd (per column,
    or one for all): it shrinks every setting's prior toward zero, by little where the effects are
    small against it.

    Settings of one knob whose priors share a part (``SettingPriors.shared_sd``: each value measured
    against the baseline's own level) are one correlated observation: a trial of selective
    recomputation then moves the prior of none with it, by what the two share.
    """
    deltas = space.setting_deltas
    p = space.n_features
    weights = _observation_precision(space, prior)
    precision = deltas.T @ weights @ deltas + np.diag(np.broadcast_to(np.asarray(column_sd) ** -2.0, p))
    return np.linalg.solve(precision, deltas.T @ (weights @ prior.mean)), precision


def _observation_precision(space: SearchSpace, prior: SettingPriors) -> np.ndarray:
    """The inverse covariance of the settings' priors: diagonal where they are independent."""
    if prior.shared_sd is None or not prior.shared_sd.any():
        return np.diag(prior.sd**-2.0)
    knob = np.array([space.knob_of(k) for k in space.setting_keys])
    shared = prior.shared_sd
    cov = np.where(knob[:, None] == knob[None, :], np.outer(shared, shared), 0.0)
    np.fill_diagonal(cov, np.maximum(prior.sd**2, shared**2 + MIN_OWN_SD**2))
    return np.linalg.inv(cov)


def prior_startup_s(space: SearchSpace, priors: PriorTable) -> np.ndarray:
    """Expected extra start-up seconds of each setting (compilation), 0 where none is known."""
    return np.array([priors.get(k).startup_s if k in priors else 0.0 for k in space.setting_keys])
