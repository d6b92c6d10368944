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

with ``g_A`` the weighted dot product of the two candidates' columns of A: with one sd ``t`` for
every pair that is ``t^2 ((sum g)^2 - sum g^2) / 2``, and only the pairs known to be likelier need
their own product. A pair no trial has held together keeps its whole variance in a candidate's
prediction: a setting measured slow in one context stays open in another.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from infrarsi.priors.interactions import DEFAULT_PAIR_SD, pair_time_sd, patch_role
from infrarsi.search.space import SearchSpace
from infrarsi.settings import Setting

DEVIATION_SHARE = 0.25
"""Of a power-of-two knob's interaction variance at its farthest value, what each value has of its
own (the rest follows the trend per octave): micro-batch 16 with a pair's sd s has variance
1.25 s^2 of which 0.25 its own, micro-batch 8 0.5 s^2 (a quarter from the trend)."""
CHUNK = 4096
"""Candidates per block when the pool is large: the per-dimension products stay a few MB."""


def dimension_roles(space: SearchSpace) -> dict[str, str]:
    """Each dimension's role: its knob's, or the one its patch stands for."""
    roles = {k.name: k.role for k in space.knobs}
    out = {}
    for col in space.columns:
        setting = Setting.parse(col.dim) if col.dim.startswith("patch:") else None
        out[col.dim] = patch_role(setting.name) if setting is not None else roles.get(col.dim, col.dim)
    return out


@dataclass(frozen=True, slots=True)
class PairKernel:
    """The covariance of the pairwise interaction terms, from candidates' setting indicators."""

    deltas: np.ndarray
    """(settings, columns): ``SearchSpace.setting_deltas``, each column scaled by its weight's root."""
    dims: list[np.ndarray]
    """Each dimension's columns."""
    default_var: float
    pairs: list[tuple[int, int, float]]
    """Dimension pairs with a larger sd: their indices in ``dims`` and the variance they add."""
    names: list[str]
    """Each dimension's name (a knob's, or ``patch:name``)."""

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
        pairs = []
        for a in range(len(names)):
            for b in range(a + 1, len(names)):
                sd = pair_time_sd(roles[names[a]], roles[names[b]])
                if sd > default_sd:
                    pairs.append((a, b, sd * sd - default_sd * default_sd))
        return cls(space.setting_deltas * np.sqrt(weight), dims, default_sd * default_sd, pairs, names)

    def _g(self, A: np.ndarray, B: np.ndarray | None) -> list[np.ndarray]:
        """Per dimension, the weighted dot products of the rows' columns (B None: each row with itself)."""
        FA = A @ self.deltas
        FB = None if B is None else B @ self.deltas
        if FB is None:
            return [(FA[:, cols] ** 2).sum(axis=1) for cols in self.dims]
        return [FA[:, cols] @ FB[:, cols].T for cols in self.dims]

    def _combine(self, g: list[np.ndarray]) -> np.ndarray:
        total = sum(g, np.zeros_like(g[0]))
        out = self.default_var * (total * total - sum((x * x for x in g), np.zeros_like(g[0]))) / 2.0
        for a, b, extra in self.pairs:
            out += extra * g[a] * g[b]
        return out

    def cross(self, A: np.ndarray, B: np.ndarray) -> np.ndarray:
        """The covariance between rows of setting-indicator matrices ``A`` and ``B``."""
        if not self.dims:
            return np.zeros((len(A), len(B)))
        return np.vstack([self._combine(self._g(A[i:i + CHUNK], B)) for i in range(0, max(len(A), 1), CHUNK)])

    def diag(self, A: np.ndarray) -> np.ndarray:
        """Each row's own variance (``cross(A, A)``'s diagonal)."""
        if not self.dims:
            return np.zeros(len(A))
        return self._combine(self._g(A, None))

    def sd(self, a: str, b: str) -> float:
        """The prior sd of the pair of dimensions named ``a`` and ``b`` (at a unit encoding)."""
        i, j = sorted((self.names.index(a), self.names.index(b)))
        extra = next((e for x, y, e in self.pairs if (x, y) == (i, j)), 0.0)
        return float(np.sqrt(self.default_var + extra))
