"""Noise statistics, speedup intervals and the loss-tolerance rule, on data with known answers."""

import math

import numpy as np
import pytest

from infrarsi import noise


def _coverage(ratio, n_base, n_cand, sigma_base, sigma_cand, confidence, reps=2000, seed=0):
    rng = np.random.default_rng(seed)
    hits = 0
    for _ in range(reps):
        base = np.exp(rng.normal(0.0, sigma_base, n_base))
        cand = np.exp(rng.normal(-math.log(ratio), sigma_cand, n_cand))
        iv = noise.speedup_interval(base.tolist(), cand.tolist(), confidence)
        hits += iv.low <= ratio <= iv.high
    return hits / reps


@pytest.mark.parametrize(
    "n_base,n_cand,sigma_base,sigma_cand",
    [(2, 2, 0.02, 0.02), (3, 3, 0.02, 0.02), (3, 3, 0.01, 0.04), (8, 8, 0.05, 0.05)],
)
def test_speedup_interval_covers_the_true_ratio_at_its_confidence(n_base, n_cand, sigma_base, sigma_cand):
    # With 2–3 samples a z interval covers ~85%; only a t interval reaches 95%. (Welch's df
    # under-covers when a 2-sample side is much noisier than a larger other side; verification
    # runs both sides equally often, the case tested here.)
    coverage = _coverage(1.25, n_base, n_cand, sigma_base, sigma_cand, 0.95)
    assert 0.93 <= coverage <= 0.985, coverage


def test_speedup_interval_narrows_with_more_samples_and_is_centred_on_the_ratio():
    rng = np.random.default_rng(1)
    base = np.exp(rng.normal(0.0, 0.02, 40)).tolist()
    cand = np.exp(rng.normal(-math.log(1.1), 0.02, 40)).tolist()
    wide = noise.speedup_interval(base[:3], cand[:3])
    narrow = noise.speedup_interval(base, cand)
    assert narrow.high - narrow.low < wide.high - wide.low
    assert narrow.low < 1.1 < narrow.high
    assert narrow.low > 1.05 and narrow.clears(1.05) and not narrow.clears(1.2)


def test_speedup_interval_without_spread_collapses_and_unpacks_as_a_tuple():
    point, low, high = noise.speedup_interval([2.0, 2.0], [1.0, 1.0])
    assert point == low == high == pytest.approx(2.0)


@pytest.mark.parametrize("base,cand", [([1.0], [1.0, 1.1]), ([1.0, 1.0], [0.0, 1.0]), ([1.0, math.nan], [1.0, 1.0])])
def test_speedup_interval_refuses_samples_it_cannot_use(base, cand):
    with pytest.raises(ValueError):
        noise.speedup_interval(base, cand)


def test_min_trustworthy_speedup_follows_the_documented_rule():
    assert noise.min_trustworthy_speedup(0.0) == noise.MIN_SPEEDUP_FLOOR
    assert noise.min_trustworthy_speedup(0.018) == pytest.approx(1 + 1.959964 * math.sqrt(2) * 0.018, rel=1e-6)
    assert noise.min_trustworthy_speedup(0.018, 0.99) > noise.min_trustworthy_speedup(0.018, 0.95)


def test_step_noise_recovers_known_within_and_between_run_noise():
    rng = np.random.default_rng(2)
    run_sd, step_sd, steps = 0.02, 0.05, 400
    runs = [(1.0 + rng.normal(0, run_sd)) * (1.0 + rng.normal(0, step_sd, steps)) for _ in range(60)]
    stats = noise.step_noise([r.tolist() for r in runs])
    assert stats.within_run_cv == pytest.approx(step_sd, rel=0.1)
    assert stats.run_to_run_cv == pytest.approx(run_sd, rel=0.3)
    assert stats.steps_per_run == steps and stats.runs == 60
    assert stats.min_speedup == pytest.approx(1 + 1.96 * math.sqrt(2) * stats.effective_cv, rel=1e-3)


def test_step_noise_never_trusts_less_than_within_run_noise_implies():
    # Two runs whose medians agree by luck: run-to-run CV is 0, but 10% step noise over 5 steps
    # leaves each median uncertain by ~5.6%, and the floor must say so.
    runs = [[0.9, 1.0, 1.0, 1.1, 1.0], [1.1, 1.0, 0.9, 1.0, 1.0]]
    stats = noise.step_noise(runs)
    assert stats.run_to_run_cv == 0.0
    assert stats.effective_cv == pytest.approx(noise.MEDIAN_EFFICIENCY * stats.within_run_cv / math.sqrt(5))
    assert stats.min_speedup > 1.1


def test_step_noise_needs_two_runs():
    with pytest.raises(ValueError, match="at least 2 runs"):
        noise.step_noise([[1.0, 1.0, 1.0]])


def test_loss_tolerance_uses_the_floor_when_repeats_are_identical():
    run = [8.3, 7.9, 7.2, 6.8]
    spread = noise.loss_tolerance([run, list(run)], compare_steps=3)
    assert spread.max_deviation == 0.0
    assert spread.tolerance == pytest.approx(noise.LOSS_REL_FLOOR * 8.3)
    assert spread.numerics_tolerance == pytest.approx(noise.NUMERICS_REL * 8.3)
    assert spread.reference == run and spread.spread == [0.0] * 4


def test_loss_tolerance_scales_the_observed_reassociation_deviation():
    run = [8.3, 7.9, 7.2, 6.8]
    reordered = [8.3, 7.9 + 4e-5, 7.2 - 6e-5, 6.8 + 1.0]  # step 3 is beyond K and must not count
    spread = noise.loss_tolerance([run, run], compare_steps=3, reassociated=[reordered])
    assert spread.max_deviation == pytest.approx(6e-5)
    assert spread.tolerance == pytest.approx(noise.LOSS_SAFETY * 6e-5)
    assert spread.spread[3] == pytest.approx(1.0)
    assert "reassociation" in spread.rule


def test_loss_tolerance_references_the_mean_of_differing_repeats():
    spread = noise.loss_tolerance([[2.0, 1.0], [2.0, 1.2]], compare_steps=2)
    assert spread.reference == pytest.approx([2.0, 1.1])
    assert spread.max_deviation == pytest.approx(0.1)


@pytest.mark.parametrize("runs,k", [([[1.0, math.nan]], 2), ([[1.0, 0.9]], 3)])
def test_loss_tolerance_refuses_a_baseline_without_a_usable_trajectory(runs, k):
    with pytest.raises(ValueError):
        noise.loss_tolerance(runs, compare_steps=k)


def test_a_lone_outlier_step_does_not_set_the_within_run_noise():
    """One 2 s step among 0.2 s steps (a page-fault burst) alone made the within-run CV 0.8 and the
    one-run floor 1.88x; left out, the floor is what the other steps' noise says."""
    rng = np.random.default_rng(3)
    runs = [list(0.2 * (1 + rng.normal(0, 0.01, 12))) for _ in range(3)]
    runs[1][5] = 2.0
    stats = noise.step_noise(runs)
    assert stats.within_run_cv < 0.02 and stats.min_speedup < 1.05
    assert noise.within_cv(runs[0]) == pytest.approx(noise.cv(runs[0]))  # nothing to leave out


def test_an_interval_at_a_high_level_on_two_wild_samples_is_wide_not_an_error():
    wide = noise.speedup_interval([1.0, 400.0], [2.0, 0.001], 0.9999)
    assert wide.low == pytest.approx(0.0, abs=1e-200) and wide.high > 1e100
    assert noise.pooled_speedup_interval([1.0, 400.0], [2.0, 0.001], 0.9999, ([5.0, 6.0],)).high > 1e10
