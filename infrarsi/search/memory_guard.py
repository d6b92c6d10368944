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

INTERACTION_SD = 0.3
"""Log-peak sd per dimension a candidate differs in, beyond the first, from its nearest measured
peak: a combination of settings never measured together may interact (activations times
micro-batch, times recomputation, over the tensor-parallel split) by tens of percent."""
HUNGRIER = 0.02
"""A setting is hungrier than another only if its fitted price is higher by this much (log), the
pairing's ``MIN_SAVING``: a price that is zero give or take the fit's noise orders nothing."""


def dim_membership(space: SearchSpace) -> np.ndarray:
    """Settings x dimensions: 1 where the setting moves that dimension (a knob, the coupled group, a patch)."""
    dims = sorted(set(space.setting_dims))
    return np.array([[d == dim for dim in dims] for d in space.setting_dims], dtype=float).reshape(-1, len(dims))


def dim_codes(space: SearchSpace, indicator: np.ndarray) -> np.ndarray:
    """A code per row and dimension, equal exactly when the rows hold the same settings there."""
    weights = np.random.default_rng(0).uniform(1.0, 2.0, indicator.shape[1])
    return indicator @ (dim_membership(space) * weights[:, None])


def interaction_var(space: SearchSpace, indicator: np.ndarray, measured: np.ndarray) -> np.ndarray:
    """Extra log-peak variance of each row of ``indicator``: ``INTERACTION_SD``² per dimension
    beyond the first in which it differs from the nearest of the ``measured`` rows."""
    if not len(measured):
        return np.zeros(len(indicator))
    codes, seen = dim_codes(space, indicator), dim_codes(space, measured)
    distance = np.min([(codes != row).sum(axis=1) for row in seen], axis=0)
    return INTERACTION_SD**2 * np.maximum(distance - 1, 0)


def oom_dominated(space: SearchSpace, effect: np.ndarray, indicator: np.ndarray, oomed: np.ndarray) -> np.ndarray:
    """Rows of ``indicator`` that hold, in every dimension where they differ from one of the
    ``oomed`` rows, a setting hungrier (by the fitted per-setting log ``effect``) than that row's."""
    out = np.zeros(len(indicator), dtype=bool)
    if not len(oomed):
        return out
    membership = dim_membership(space)
    paid, paid_oom = indicator @ (membership * effect[:, None]), oomed @ (membership * effect[:, None])
    codes, codes_oom = dim_codes(space, indicator), dim_codes(space, oomed)
    for paid_row, code_row in zip(paid_oom, codes_oom, strict=True):
        out |= np.all((codes == code_row) | (paid >= paid_row + HUNGRIER), axis=1)
    return out
