"""The normal tail, for censored observations (an OOM above the budget, a slow trial aborted)."""

from __future__ import annotations

import math

import numpy as np
from scipy.special import log_ndtr

_LOG_2PI = math.log(2 * math.pi)


def tail_terms(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """-log P(Z > a) and the inverse Mills ratio phi(a) / P(Z > a), stable in both tails."""
    log_tail = log_ndtr(-a)
    mills = np.exp(-0.5 * a**2 - 0.5 * _LOG_2PI - log_tail)
    return -log_tail, mills


def mean_above(mu: np.ndarray, sd: np.ndarray, bound: np.ndarray) -> np.ndarray:
    """E[Y | Y > bound] for Y ~ N(mu, sd): where a censored observation most likely lies."""
    sd = np.maximum(sd, 1e-6)
    _, mills = tail_terms((bound - mu) / sd)
    return np.maximum(bound, mu + sd * mills)
