"""What the additive memory model cannot say by itself: how far a candidate lies from the measured
peaks, and which candidates an OOM already rules out.

The memory model is additive in log peak over the settings, while a real peak is a sum of parts
that scale with different knobs (weights and optimizer state with the parallel layout and
sharding; activations with the micro-batch, recomputation and the layout). Its effects hold near
the trials that measured them; a combination of settings never measured together may interact,
so its prediction is less sure than the residual sd says (``interaction_var``). And a peak only
grows with each setting's own memory price, so a candidate at least as hungry as an OOMed trial in
every dimension runs out of memory too, whatever the fit's mean says (``oom_dominated``).
"""

from __future__ import annotations

import numpy as np

from infrarsi.search.space import SearchSpace

INTERACTION_SD = 0.5
"""Log-peak sd of what the additive model misses for a combination of settings never measured
together (activations times micro-batch, times recomputation, over the tensor-parallel split): on
the simulated clusters its misfit reached an e-fold next to measured peaks."""
INTERACTION_CORRELATION = 0.6
"""Correlation of that misfit between candidates per dimension they differ in."""
NUGGET_SD = 0.05
"""A measured peak's own noise, in the misfit's field."""
HUNGRIER = 0.02
"""A setting is hungrier (or a saver) against another only if its fitted price differs by this
much (log): a price that is zero give or take the fit's noise orders nothing."""


def dim_membership(space: SearchSpace) -> np.ndarray:
    """Settings x dimensions: 1 where the setting moves that dimension (a knob, the coupled group, a patch)."""
    dims = sorted(set(space.setting_dims))
    membership = np.zeros((len(space.setting_dims), len(dims)))  # a space with no setting has no dimension
    for i, d in enumerate(space.setting_dims):
        membership[i, dims.index(d)] = 1.0
    return membership


def dim_prices(space: SearchSpace, effect: np.ndarray, indicator: np.ndarray) -> np.ndarray:
    """The log memory each row pays in each dimension, by the fitted per-setting ``effect``."""
    return indicator @ (dim_membership(space) * effect[:, None])


def dim_codes(space: SearchSpace, indicator: np.ndarray) -> np.ndarray:
    """A code per row and dimension, equal exactly when the rows hold the same settings there."""
    weights = np.random.default_rng(0).uniform(1.0, 2.0, int(indicator.shape[1]))
    return indicator @ (dim_membership(space) * weights[:, None])


def nearest_distance(space: SearchSpace, indicator: np.ndarray, others: np.ndarray) -> np.ndarray:
    """Dimensions each row of ``indicator`` differs in from the nearest row of ``others``."""
    codes, seen = dim_codes(space, indicator), dim_codes(space, others)
    return np.min([(codes != row).sum(axis=1) for row in seen], axis=0)


def interaction(space: SearchSpace, indicator: np.ndarray, measured: np.ndarray,
                residuals: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """What the additive model misses at each row of ``indicator``, learnt from its ``residuals``
    (log peak minus the model's mean) at the ``measured`` rows: a Gaussian process over the number
    of dimensions two candidates differ in. Returns the log-peak shift and the extra variance: a
    candidate next to a peak the model under-predicted is shifted up, one far from every measured
    peak keeps ``INTERACTION_SD``."""
    prior = np.full(len(indicator), INTERACTION_SD**2)
    if not len(measured):
        return np.zeros(len(indicator)), prior
    codes, seen = dim_codes(space, indicator), dim_codes(space, measured)
    cross = INTERACTION_SD**2 * INTERACTION_CORRELATION ** np.stack([(codes != row).sum(axis=1) for row in seen], axis=1)
    within = INTERACTION_SD**2 * INTERACTION_CORRELATION ** (seen[:, None, :] != seen[None, :, :]).sum(axis=2)
    solve = np.linalg.solve(within + NUGGET_SD**2 * np.eye(len(seen)), np.column_stack([residuals, cross.T]))
    return cross @ solve[:, 0], np.maximum(prior - np.einsum("ij,ji->i", cross, solve[:, 1:]), 0.0)


def oom_dominated(space: SearchSpace, effect: np.ndarray, indicator: np.ndarray, oomed: np.ndarray) -> np.ndarray:
    """Rows of ``indicator`` that hold, in every dimension where they differ from one of the
    ``oomed`` rows, a setting hungrier (by the fitted per-setting log ``effect``) than that row's."""
    return _against_oomed(space, effect, indicator, oomed, hungrier=True)


def oom_savers(space: SearchSpace, effect: np.ndarray, indicator: np.ndarray, oomed: np.ndarray,
               believed: np.ndarray | None = None) -> np.ndarray:
    """Rows of ``indicator`` that differ from one of the ``oomed`` rows only by memory savers: in
    every dimension where they differ, a setting cheaper than that row's by the fitted ``effect``
    and, where given, by the ``believed`` one too (the priors'). The fit learns a setting's price
    from the trials that held it, and trials under other settings can teach it the wrong sign: on
    the simulated 175B cluster 2 virtual stages looked cheaper than 4 after trials under full
    recomputation, where the pipeline multiplies only part of the activations."""
    savers = _against_oomed(space, effect, indicator, oomed, hungrier=False)
    return savers if believed is None else savers & _against_oomed(space, believed, indicator, oomed, hungrier=False)


def _against_oomed(space: SearchSpace, effect: np.ndarray, indicator: np.ndarray, oomed: np.ndarray, *,
                   hungrier: bool) -> np.ndarray:
    out = np.zeros(len(indicator), dtype=bool)
    if not len(oomed):
        return out
    paid, paid_oom = dim_prices(space, effect, indicator), dim_prices(space, effect, oomed)
    codes, codes_oom = dim_codes(space, indicator), dim_codes(space, oomed)
    for paid_row, code_row in zip(paid_oom, codes_oom, strict=True):
        moved = paid >= paid_row + HUNGRIER if hungrier else paid <= paid_row - HUNGRIER
        out |= np.all((codes == code_row) | moved, axis=1)
    return out
