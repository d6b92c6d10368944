"""Pairwise interactions of settings as a fixed part of the time model's covariance.

Two dimensions (knobs or patches) A and B interact through a term on log step time that is
bilinear in their encodings (``SearchSpace.columns``): ``sum over a in A, b in B of w_ab f_a f_b``
with independent zero-mean weights. For a switch or a patch that is one term for the pair (bf16 x
SDPA); for a power-of-two knob it is a trend per octave shared by every value, plus each value's
own deviation, so micro-batch 8 with SDPA measured says something about micro-batch 16 with SDPA
and, reversed, about micro-batch 2. The weights' sds are the priors' (``infrarsi.priors.interactions``:
where two roles meet, bf16 x SDPA 0.5; any two dimensions ``DEFAULT_PAIR_SD``). Their covariance
between two candidates is

    k(x, x') = sum over pairs A < B of  sd_AB^2 * g_A(x, x') * g_B(x, x')

with ``g_A`` the weighted dot product of the two candidates' columns of A. It is computed as the
dot product of one feature per pair of columns from two dimensions, ``f_a f_b sd_AB`` (a few
hundred on the simulated clusters). A pair no trial has held together keeps its whole variance in
a candidate's prediction: a setting measured slow in one context stays open in another.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from infrarsi.priors.interactions import DEFAULT_PAIR_SD, pair_time_sd, patch_role
from infrarsi.search.space import SearchSpace
from infrarsi.settings import Setting

DEVIATION_SHARE = 0.25
"""Of a power-of-two knob's interaction variance at its farthest value, what each value has of its
own (the rest follows the trend per octave): micro-batch 16 with a pair's sd s has variance
1.25 s^2 of which 0.25 its own, micro-batch 8 0.5 s^2 (a quarter from the trend)."""


def dimension_roles(space: SearchSpace) -> dict[str, str]:
    """Each dimension's role: its knob's, or the one its patch stands for."""
    roles = {k.name: k.role for k in space.knobs}
    out = {}
    for col in space.columns:
        setting = Setting.parse(col.dim) if col.dim.startswith("patch:") else None
        out[col.dim] = patch_role(setting.name) if setting is not None else roles.get(col.dim, col.dim)
    return out


@dataclass(slots=True)
class PairKernel:
    """The covariance of the pairwise interaction terms, from candidates' setting indicators."""

    deltas: np.ndarray
    """(settings, columns): ``SearchSpace.setting_deltas``, each column scaled by its weight's root."""
    dims: list[np.ndarray]
    """Each dimension's columns."""
    names: list[str]
    """Each dimension's name (a knob's, or ``patch:name``)."""
    variance: np.ndarray
    """(dimensions, dimensions): each pair's prior variance."""
    left: np.ndarray
    right: np.ndarray
    """The two columns of each pair feature."""
    weight: np.ndarray
    """Each pair feature's sd."""
    _seen: list[tuple[np.ndarray, np.ndarray]] = field(default_factory=list)
    """The last few indicator matrices seen and their features (the enumerated pool is the same
    array every ask)."""

    @classmethod
    def of(cls, space: SearchSpace, default_sd: float = DEFAULT_PAIR_SD) -> PairKernel:
        roles = dimension_roles(space)
        names = list(dict.fromkeys(col.dim for col in space.columns))
        weight = np.ones(space.n_features)
        for name in names:
            cols = [j for j, col in enumerate(space.columns) if col.dim == name]
            log2 = [j for j in cols if space.columns[j].kind == "log2"]
            if log2:
                octaves = np.abs(space.setting_deltas[:, log2[0]]).max()
                weight[log2[0]] = (1 - DEVIATION_SHARE) / max(octaves, 1.0) ** 2
                weight[[j for j in cols if j != log2[0]]] = DEVIATION_SHARE
        dims = [np.array([j for j, col in enumerate(space.columns) if col.dim == name]) for name in names]
        variance = np.array([[max(pair_time_sd(roles[a], roles[b]), default_sd) ** 2 for b in names]
                             for a in names]).reshape(len(names), len(names))
        dim_of = np.array([names.index(col.dim) for col in space.columns], dtype=int)
        left, right = np.triu_indices(space.n_features, 1)
        apart = dim_of[left] != dim_of[right]
        left, right = left[apart], right[apart]
        return cls(space.setting_deltas * np.sqrt(weight), dims, names, variance, left, right,
                   np.sqrt(variance[dim_of[left], dim_of[right]]))

    def features(self, indicator: np.ndarray) -> np.ndarray:
        """(rows, pair features): each row's product of every two columns from two dimensions,
        times the pair's sd."""
        for seen, out in self._seen:
            if seen is indicator:
                return out
        F = indicator @ self.deltas
        out = F[:, self.left] * F[:, self.right] * self.weight
        self._seen = [(indicator, out), *self._seen[:3]]
        return out

    def cross(self, A: np.ndarray, B: np.ndarray) -> np.ndarray:
        """The covariance between rows of setting-indicator matrices ``A`` and ``B``."""
        FA = self.features(A)
        return FA @ self.features(B).T

    def diag(self, A: np.ndarray) -> np.ndarray:
        """Each row's own variance (``cross(A, A)``'s diagonal)."""
        return (self.features(A) ** 2).sum(axis=1)

    def sd(self, a: str, b: str) -> float:
        """The prior sd of the pair of dimensions named ``a`` and ``b`` (at a unit encoding)."""
        return float(np.sqrt(self.variance[self.names.index(a), self.names.index(b)]))
