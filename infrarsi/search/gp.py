"""Exact Gaussian-process regression with a linear + RBF + noise kernel, in numpy.

k(x, x') = s0^2 + x.x'  +  s P(x, x')  +  a exp(-|x - x'|^2 / 2 l^2)  +  n [x = x']

The linear part has fixed scale (the caller scales the inputs so it encodes its prior). ``P`` is a
covariance the caller knows the shape of (the time model's pairwise interactions, given as
matrices: ``pairs`` to ``fit``, ``pairs_cross`` and ``pairs_diag`` to ``predict``), its scale s
fitted with a log-normal prior around 1 (``PAIR_SCALE_SD``): the caller's sds stand until the
data say otherwise, and a surface the trials find additive shrinks them, so that with as many
pair terms as trials one lucky run is not believed as an interaction. The RBF amplitude a, length
l and noise n are fitted by maximising the log marginal likelihood (with s's prior) with analytic
gradients. Written out rather than taken from scikit-learn's GaussianProcessRegressor
because that one spends ~10 ms of Python per likelihood evaluation on kernel bookkeeping, which
alone breaks the 200 ms budget per suggestion on a shared 2-core machine; this one needs ~0.3 ms.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np
from scipy.linalg import cho_solve, solve_triangular
from scipy.optimize import minimize

LINEAR_OFFSET = 0.1
"""s0: prior sd of a constant left in the residuals after the caller removes their mean."""
MAX_AMPLITUDE = 0.25
"""Largest RBF variance (sd 0.5 in log time, ~1.6x): interactions beyond that are rare, and a
looser bound lets one extreme trial make every unexplored candidate look wildly uncertain."""
MAX_NOISE_SD = 0.25
"""Largest run-to-run sd of log step time the fit may settle on (unless doctor measured more):
beyond it a GP explains a surprising trial as noise and every prediction turns uncertain."""
DEFAULT_NOISE_FLOOR = 0.003
"""Smallest noise sd the fit may settle on: with few points it would otherwise interpolate."""
PAIR_SCALE_SD = 1.0
"""Prior sd of log s, the pairs' variance scale: within 1 sd the caller's pair sds are right to a
factor 1.65 either way."""
NOISE_PRIOR_SD = 2.0
"""Prior sd of the log noise variance around the caller's typical noise (``GP(noise_center=)``): a
factor e (2.7) on the noise's sd at one sd. Without it, a kernel with a term per pair of settings
explains every trial exactly and settles the noise at its floor: a single lucky run is then believed."""
PAIR_SCALE_BOUNDS = (0.01, 4.0)
"""s stays within these: the pairs' sds at most twice what the caller said, at least a tenth."""


@dataclass(frozen=True, slots=True)
class Hyper:
    amplitude: float
    length: float
    noise: float
    scale: float = 1.0
    """Of the caller's pair covariance ``P``."""

    def as_log(self) -> np.ndarray:
        return np.log([self.amplitude, self.length, self.noise, self.scale])

    @classmethod
    def from_log(cls, theta: np.ndarray) -> Hyper:
        a, length, n, s = np.exp(theta)
        return cls(float(a), float(length), float(n), float(s))


DEFAULT_HYPER = Hyper(amplitude=0.01, length=2.0, noise=1e-3)


def _sq_dist(A: np.ndarray, B: np.ndarray) -> np.ndarray:
    d = (A * A).sum(1)[:, None] + (B * B).sum(1)[None, :] - 2 * A @ B.T
    return np.maximum(d, 0.0)


class GP:
    def __init__(self, hyper: Hyper = DEFAULT_HYPER, *, noise_floor: float = DEFAULT_NOISE_FLOOR,
                 noise_center: float | None = None):
        """``noise_center``: the run-to-run sd of log step time to expect (doctor's CV, or a
        typical one), the centre of the noise's log-normal prior; None: no prior (bounds only)."""
        max_noise = max(MAX_NOISE_SD, 2 * noise_floor)
        self.noise_center = None if noise_center is None else 2 * math.log(min(max(noise_center, noise_floor), max_noise))
        self.bounds = [(math.log(1e-6), math.log(MAX_AMPLITUDE)), (math.log(0.1), math.log(100.0)),
                       (2 * math.log(noise_floor), 2 * math.log(max_noise)),
                       (math.log(PAIR_SCALE_BOUNDS[0]), math.log(PAIR_SCALE_BOUNDS[1]))]
        self.hyper = replace(hyper, noise=max(hyper.noise, noise_floor**2))

    def _neg_lml(self, theta: np.ndarray, y: np.ndarray, lin: np.ndarray, dist: np.ndarray, pairs: np.ndarray
                 ) -> tuple[float, np.ndarray]:
        """Negative log marginal likelihood plus s's prior, and its gradient in ``theta`` (logs)."""
        a, length, n, s = np.exp(theta)
        rbf = a * np.exp(-dist / (2 * length * length))
        K = lin + s * pairs + rbf + n * np.eye(len(y))
        try:
            L = np.linalg.cholesky(K)
        except np.linalg.LinAlgError:
            return 1e25, np.zeros(4)
        alpha = cho_solve((L, True), y)
        nll = 0.5 * y @ alpha + np.log(np.diag(L)).sum() + 0.5 * len(y) * math.log(2 * math.pi)
        nll += 0.5 * (theta[3] / PAIR_SCALE_SD) ** 2
        noise_pull = 0.0
        if self.noise_center is not None:
            nll += 0.5 * ((theta[2] - self.noise_center) / NOISE_PRIOR_SD) ** 2
            noise_pull = (theta[2] - self.noise_center) / NOISE_PRIOR_SD**2
        W = np.outer(alpha, alpha) - cho_solve((L, True), np.eye(len(y)))
        grads = (
            (W * rbf).sum(),  # d K / d log a = rbf
            (W * rbf * dist).sum() / (length * length),  # d K / d log l = rbf * dist / l^2
            n * np.trace(W),  # d K / d log n = n I
            s * (W * pairs).sum(),  # d K / d log s = s P
        )
        return nll, -0.5 * np.array(grads) + np.array([0.0, 0.0, noise_pull, theta[3] / PAIR_SCALE_SD**2])

    def fit(self, X: np.ndarray, y: np.ndarray, *, optimize: bool = True, pairs: np.ndarray | None = None) -> GP:
        """``pairs``: the caller's pair covariance ``P`` between the rows of ``X`` (none: zero)."""
        lin = LINEAR_OFFSET**2 + X @ X.T
        pairs = np.zeros_like(lin) if pairs is None else pairs
        dist = _sq_dist(X, X)
        if optimize:
            res = minimize(self._neg_lml, self.hyper.as_log(), args=(y, lin, dist, pairs), jac=True,
                           method="L-BFGS-B", bounds=self.bounds)
            self.hyper = Hyper.from_log(res.x)
        h = self.hyper
        K = lin + h.scale * pairs + h.amplitude * np.exp(-dist / (2 * h.length**2)) + h.noise * np.eye(len(y))
        self._L = np.linalg.cholesky(K)
        self._alpha = cho_solve((self._L, True), y)
        self._X = X
        return self

    def predict(self, Xs: np.ndarray, *, with_noise: bool = False, pairs_cross: np.ndarray | None = None,
                pairs_diag: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Posterior mean and sd of the latent function (plus the noise if ``with_noise``);
        ``pairs_cross`` and ``pairs_diag``: the pair covariance ``P`` between ``Xs`` and the
        training rows, and of each row of ``Xs`` with itself."""
        h = self.hyper
        Ks = LINEAR_OFFSET**2 + Xs @ self._X.T + h.amplitude * np.exp(-_sq_dist(Xs, self._X) / (2 * h.length**2))
        if pairs_cross is not None:
            Ks = Ks + h.scale * pairs_cross
        mean = Ks @ self._alpha
        V = solve_triangular(self._L, Ks.T, lower=True)
        prior_var = LINEAR_OFFSET**2 + (Xs * Xs).sum(1) + h.amplitude + (h.noise if with_noise else 0.0)
        if pairs_diag is not None:
            prior_var = prior_var + h.scale * pairs_diag
        var = np.maximum(prior_var - (V * V).sum(0), 1e-12)
        return mean, np.sqrt(var)
