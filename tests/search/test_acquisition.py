"""EI x P(fits) and memory-saver pairing on models fitted to a known surface."""

import math

import numpy as np
import pytest

from infrarsi.search.acquisition import expected_improvement, memory_saver_pair, score
from infrarsi.search.memory_model import MemoryModel
from infrarsi.search.synthetic import DENSE_MEM, DENSE_TIME, Surface
from infrarsi.search.time_model import TimeModel


def test_expected_improvement_matches_monte_carlo():
    rng = np.random.default_rng(0)
    mean, sd, best = np.array([0.0, 0.3, -0.2]), np.array([0.1, 0.2, 0.05]), 0.1
    draws = rng.normal(mean, sd, (200_000, 3))
    assert expected_improvement(mean, sd, best) == pytest.approx(np.maximum(best - draws, 0).mean(0), abs=2e-3)


@pytest.fixture
def fitted(dense_space):
    """Models fitted on 40 random trials of a surface where micro-batch 16 does not fit."""
    surface = Surface(dense_space, DENSE_TIME, DENSE_MEM, base_peak=0.5 * dense_space.budget_bytes, seed=0)
    cands = [dense_space.baseline()] + dense_space.sample(np.random.default_rng(0), 39)
    history = [surface.run(c) for c in cands]
    measured = {t.candidate.key() for t in history}
    return surface, history, measured, TimeModel(dense_space).fit(history), MemoryModel(dense_space).fit(history)


def _variant(space, cand, **knobs):
    for name, value in knobs.items():
        cand = space.with_value(cand, name, value)
    return cand


def test_prefers_a_fast_candidate_that_fits_over_a_faster_one_that_does_not(dense_space, fitted):
    surface, _, measured, time, memory = fitted
    base = type(dense_space.baseline())(knobs=dense_space.baseline().knobs, patches=("fused_qkv",))
    faster, fits = _variant(dense_space, base, micro_batch_size=16), _variant(dense_space, base, micro_batch_size=8)
    assert not surface.fits(faster) and surface.fits(fits)
    assert {faster.key(), fits.key()}.isdisjoint(measured)
    ind = dense_space.indicator([faster, fits])
    pred = time.predict_indicator(ind)
    p_fits = memory.p_fits(ind @ dense_space.setting_deltas, dense_space.budget_bytes)
    assert pred.log_job[0] < pred.log_job[1]  # the model knows which is faster
    assert p_fits[0] < 0.5 < p_fits[1]
    scores = score(pred, p_fits, best_log_job=float(np.max(pred.log_job)) + 0.05)
    assert scores.ei[0] > scores.ei[1]  # on time alone the OOM one would win
    assert scores.value[1] > scores.value[0]


def test_memory_saver_pairing_picks_the_cheapest_saver(dense_space, fitted):
    surface, _, measured, time, memory = fitted
    pool = dense_space.enumerated()
    anchor_cand = _variant(dense_space, dense_space.baseline(), micro_batch_size=16)
    anchor_cand = type(anchor_cand)(knobs=anchor_cand.knobs, patches=("flash_mlp",))
    # Savers on this surface: checkpointing (-30% memory, +17% time), micro-batch 8 (-40%, +4%),
    # dropping flash_mlp (-10%, +20%: not enough). The cheapest one that fits is micro-batch 8.
    assert not surface.fits(anchor_cand)
    anchor = pool.keys.index(anchor_cand.key())
    pred = time.predict_indicator(pool.indicator)
    p_fits = memory.p_fits(pool.features, dense_space.budget_bytes)
    scores = score(pred, p_fits, best_log_job=float(np.min(pred.log_job)))
    fresh = np.array([k not in measured for k in pool.keys])
    pair = memory_saver_pair(dense_space, memory, pool.indicator, scores, anchor, fresh)
    assert pair is not None
    chosen = pool.candidates[pair]
    assert chosen.key() == _variant(dense_space, anchor_cand, micro_batch_size=8).key()
    assert surface.fits(chosen)
    ckpt = _variant(dense_space, anchor_cand, activation_checkpointing=True)
    assert pred.log_job[pair] < pred.log_job[pool.keys.index(ckpt.key())]
    assert math.isclose(p_fits[pool.keys.index(ckpt.key())], 1.0, abs_tol=0.5)  # checkpointing fits too


def test_no_pairing_when_no_saver_fits(dense_space, fitted):
    _, _, measured, time, memory = fitted
    pool = dense_space.enumerated()
    anchor = pool.keys.index(dense_space.baseline().key())
    pred = time.predict_indicator(pool.indicator)
    p_fits = np.zeros(len(pool.keys))  # nothing fits
    scores = score(pred, p_fits, best_log_job=0.0)
    fresh = np.ones(len(pool.keys), dtype=bool)
    assert memory_saver_pair(dense_space, memory, pool.indicator, scores, anchor, fresh) is None
