"""A power-of-two knob's memory curve, refitted through the values the trials measured.

A training job's peak is a fixed part (weights, gradients, optimizer state, the interpreter) plus a
part that scales with a batch-like knob (activations), so relative to the default value d the peak
at value v is ``1 + s (v/d - 1)``, where s is the scaled part's share at the default; a knob that
splits the work (accumulation chunks) gives ``1 + s (d/v - 1)``. The priors assume a share (the
built-in micro-batch prior: 30% activations on a CPU); one measured value fixes the job's own. Its
untried values then follow the refitted curve, not the prior's: on the paced test job
(tests/test_data/stages/paced) micro-batches 4 and 8 measure a 54% share, which puts micro-batch
16 at 4.8x the default's peak where the prior said 3.1x, and an OOM there no longer reads as "far
above the budget, so any variant is hopeless".
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.optimize import minimize_scalar

from infrarsi.search.prior_check import Z_BAND

MIN_EFFECT_SD = 0.02
"""A measured effect is never taken as surer than peaks repeat (see memory_model._SIGMA_BOUNDS)."""
CURVE_SD = 0.05
"""Spread of a refitted value one octave from the nearest measured one..."""
CURVE_SD_PER_OCTAVE = 0.05
"""...growing with each further octave of extrapolation."""
FIT_SLACK = 0.05
"""Log distance (about 5%) a measured value may sit off the curve beyond its Z_BAND sds: more, and
the knob does not follow this shape; its priors are left as they were."""


@dataclass(frozen=True, slots=True)
class Curve:
    """``log peak ratio = log(1 + share * (x - 1))`` with x = v/d (``grows``) or d/v."""

    grows: bool
    share: float

    def effect(self, log2_ratio: np.ndarray) -> np.ndarray:
        x = np.exp2(log2_ratio if self.grows else -log2_ratio)
        return np.log1p(self.share * (x - 1.0))


def fit_curve(log2_ratio: np.ndarray, effects: np.ndarray, sds: np.ndarray, grows: bool) -> tuple[Curve, float]:
    """The share in [0, 1] that best fits ``effects`` (weighted by ``sds``), and its weighted SSE."""
    weights = 1.0 / np.maximum(sds, MIN_EFFECT_SD) ** 2

    def sse(share: float) -> float:
        return float(weights @ (effects - Curve(grows, share).effect(log2_ratio)) ** 2)

    best = minimize_scalar(sse, bounds=(0.0, 1.0), method="bounded")
    return Curve(grows, float(best.x)), float(best.fun)


def refit_untried(
    mean: np.ndarray,
    sd: np.ndarray,
    known: np.ndarray,
    knobs: list[str],
    log2_ratio: np.ndarray,
    measured: np.ndarray,
    effects: np.ndarray,
    effect_sds: np.ndarray,
) -> np.ndarray:
    """Rows of ``mean``/``sd``/``known`` (updated in place) whose untried power-of-two value now
    follows its knob's curve through the fitted ``effects`` of the values trials ``measured``.

    The shape (grows or splits) is the one the measured values fit better; where one value fits
    both exactly, the one the knob's own priors follow. A knob whose measured values fit neither
    within Z_BAND sds plus FIT_SLACK keeps its priors."""
    changed = np.zeros(len(mean), dtype=bool)
    owner = np.array(knobs)
    ordered = log2_ratio != 0
    for knob in sorted(set(owner[ordered])):
        rows = (owner == knob) & ordered
        seen, untried = rows & measured, rows & ~measured
        if not seen.any() or not untried.any():
            continue
        fits = [fit_curve(log2_ratio[seen], effects[seen], effect_sds[seen], grows) for grows in (True, False)]
        with_prior = rows & known
        if with_prior.any():
            by_prior = [fit_curve(log2_ratio[with_prior], mean[with_prior], sd[with_prior], c.grows)[1] for c, _ in fits]
        else:
            by_prior = [0.0, 1.0]
        curve, _ = min(zip(fits, by_prior, strict=True), key=lambda f: (round(f[0][1], 6), f[1]))[0]
        off = np.abs(effects[seen] - curve.effect(log2_ratio[seen]))
        if np.any(off > Z_BAND * np.maximum(effect_sds[seen], MIN_EFFECT_SD) + FIT_SLACK):
            continue
        for i in np.flatnonzero(untried):
            octaves = float(np.min(np.abs(log2_ratio[seen] - log2_ratio[i])))
            mean[i] = float(curve.effect(log2_ratio[i : i + 1])[0])
            sd[i] = CURVE_SD + CURVE_SD_PER_OCTAVE * max(octaves - 1.0, 0.0)
            known[i] = True
            changed[i] = True
    return changed

