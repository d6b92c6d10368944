"""The time model learns effects with shrinking uncertainty, handles censoring and start-up."""

import math

import numpy as np
import pytest

from infrarsi.priors.types import Prior, PriorTable
from infrarsi.search.acquisition import p_gain
from infrarsi.search.gp import GP
from infrarsi.search.infrarsi_sampler import CONVERGED_CHANCE
from infrarsi.search.synthetic import DENSE_TIME, Surface, result
from infrarsi.search.time_model import TimeModel
from infrarsi.trials import TrialStatus


def _history(space, n, seed=0, **surface_kw):
    surface = Surface(space, DENSE_TIME, {}, base_peak=0.1 * space.budget_bytes, seed=seed, **surface_kw)
    cands = [space.baseline()] + space.sample(np.random.default_rng(seed), n - 1)
    return surface, [surface.run(c) for c in cands]


def _threads_effect(model, space):
    """Predicted log change of one thread against two, at the baseline, and its sd."""
    base = space.baseline()
    one = space.with_value(base, "threads", 1)
    pred = model.predict([base, one])
    return pred.log_step[1] - pred.log_step[0], pred.log_step_sd[1]


def test_learns_a_known_effect_and_grows_surer_with_data(dense_space):
    true = DENSE_TIME["threads=1"]
    effects, sds = [], []
    for n in (6, 20, 60):
        _, history = _history(dense_space, n)
        effect, sd = _threads_effect(TimeModel(dense_space).fit(history), dense_space)
        effects.append(effect), sds.append(sd)
    assert sds[0] > sds[1] > sds[2]
    assert effects[-1] == pytest.approx(true, abs=0.05)
    assert abs(effects[-1] - true) <= abs(effects[0] - true) + 0.01


def test_predictions_match_the_surface_out_of_sample(dense_space):
    surface, history = _history(dense_space, 60, seed=3)
    model = TimeModel(dense_space).fit(history)
    unseen = [c for c in dense_space.sample(np.random.default_rng(99), 200)
              if c.key() not in {t.candidate.key() for t in history}]
    pred = model.predict(unseen)
    truth = np.array([surface.log_step(c) for c in unseen])
    assert np.sqrt(np.mean((pred.log_step - truth) ** 2)) < 0.06
    # The sd is honest: most errors fall within 2 sd.
    assert np.mean(np.abs(pred.log_step - truth) < 2 * np.sqrt(pred.log_step_sd**2 + 0.02**2)) > 0.8


def test_a_right_prior_helps_before_any_data_on_the_setting(dense_space):
    _, history = _history(dense_space, 12, seed=1)
    history = [t for t in history if t.candidate.knobs["threads"] == 2]
    prior = PriorTable.of([Prior(key="threads=1", time_log_mean=math.log(1.8), time_log_sd=0.1,
                                  mem_log_mean=0.0, mem_log_sd=0.1, source="test")])
    with_prior, _ = _threads_effect(TimeModel(dense_space, prior).fit(history), dense_space)
    without, _ = _threads_effect(TimeModel(dense_space).fit(history), dense_space)
    assert with_prior == pytest.approx(math.log(1.8), abs=0.02)
    # Without it nothing is known of threads=1 (sd ~1): what the RBF's fit to the other settings
    # leaves there is well under half the prior's effect.
    assert abs(without) < 0.25


def test_aborted_slow_trials_count_as_slower_than_their_bound(dense_space):
    base = dense_space.baseline()
    slow = dense_space.with_value(base, "dtype", "bfloat16")
    fast = dense_space.with_value(base, "threads", 1)
    history = [result(base, step=1.0), result(base, step=1.02), result(fast, step=1.75),
               result(slow, TrialStatus.ABORTED_SLOW, step=3.0)]
    model = TimeModel(dense_space).fit(history)
    assert model.predict([slow]).step_s[0] > 3.0
    # Ignoring the aborted trial would leave bf16 at the baseline's speed.
    ignored = TimeModel(dense_space).fit(history[:3])
    assert ignored.predict([slow]).step_s[0] < 1.5


def test_projected_job_time_amortizes_start_up(dense_space):
    surface, history = _history(dense_space, 40, seed=2, startup_effects={"compile=True": 35.0})
    model = TimeModel(dense_space).fit(history)
    base = dense_space.baseline()
    compiled = dense_space.with_value(base, "compile", True)
    pred = model.predict([base, compiled])
    assert pred.startup_s[1] - pred.startup_s[0] == pytest.approx(35.0, rel=0.25)
    assert pred.job_s == pytest.approx(pred.startup_s + dense_space.planned_steps * pred.step_s)


def test_gp_gradient_matches_finite_differences():
    from scipy.optimize import check_grad
    rng = np.random.default_rng(0)
    X = rng.integers(0, 2, (30, 6)).astype(float)
    y = X @ rng.normal(0, 0.3, 6) + 0.3 * np.sin(X.sum(1)) + rng.normal(0, 0.05, 30)
    gp = GP()
    lin, dist = 0.01 + X @ X.T, ((X[:, None] - X[None]) ** 2).sum(-1)
    shared = X @ X.T
    pairs = 0.01 * shared * (shared - 1) / 2
    theta = np.log([0.05, 1.5, 0.01, 0.7])
    err = check_grad(lambda t: gp._neg_lml(t, y, lin, dist, pairs)[0], lambda t: gp._neg_lml(t, y, lin, dist, pairs)[1],
                     theta)
    assert err < 1e-4 * max(1.0, np.linalg.norm(gp._neg_lml(theta, y, lin, dist, pairs)[1]))


def test_a_start_up_prior_counts_before_any_compiled_trial(dense_space):
    _, history = _history(dense_space, 10, seed=4)
    history = [t for t in history if not t.candidate.knobs["compile"]]
    prior = PriorTable.of([Prior(key="compile=True", time_log_mean=0.0, time_log_sd=0.2, mem_log_mean=0.0,
                                 mem_log_sd=0.2, source="test", startup_s=40.0)])
    base = dense_space.baseline()
    compiled = dense_space.with_value(base, "compile", True)
    startup = TimeModel(dense_space, prior).fit(history).predict([base, compiled]).startup_s
    assert startup[0] == pytest.approx(3.0, abs=0.1)
    assert startup[1] - startup[0] == pytest.approx(40.0, abs=0.5)


def test_a_twenty_fold_outlier_lands_in_its_own_effect_not_in_everyones_uncertainty(dense_space):
    # bf16 believed 25% faster (sd 0.3); DENSE_TIME makes it e^3 = 20x slower.
    wrong = PriorTable.of([Prior(key="dtype=bfloat16", time_log_mean=-0.3, time_log_sd=0.3,
                                 mem_log_mean=0.0, mem_log_sd=0.1, source="test")])
    surface, history = _history(dense_space, 12, seed=5)
    bf16 = [t for t in history if t.candidate.knobs.get("dtype") == "bfloat16"]
    assert len(bf16) >= 2 and len(history) - len(bf16) >= 2
    model = TimeModel(dense_space, wrong).fit(history)
    assert "dtype=bfloat16" in model.miscalibrated
    fp32 = [c for c in dense_space.sample(np.random.default_rng(7), 100) if c.knobs.get("dtype") != "bfloat16"]
    pred = model.predict(fp32)
    truth = np.array([surface.log_step(c) for c in fp32])
    # Candidates without bf16 stay as predictable as if the bf16 trials had never run: the outlier
    # did not inflate the GP's noise or amplitude.
    without = TimeModel(dense_space, wrong).fit([t for t in history if t not in bf16]).predict(fp32)
    assert np.median(pred.log_step_sd) <= 1.25 * np.median(without.log_step_sd)
    rmse = np.sqrt(np.mean((pred.log_step - truth) ** 2))
    assert rmse <= 1.25 * np.sqrt(np.mean((without.log_step - truth) ** 2))


def test_a_knob_contradicted_at_the_values_tried_is_not_trusted_at_the_untried_ones(dense_space):
    # The micro-batch priors follow one shallow slope (as the built-in table's do); the job's real
    # slope is ~0.55 per doubling down from the default 4, so micro-batch 16 is the fastest.
    shallow = PriorTable.of([Prior(key=f"micro_batch_size={mb}", time_log_mean=(-m if mb < 4 else m), time_log_sd=0.1,
                                   mem_log_mean=0.0, mem_log_sd=0.1, source="test")
                             for mb, m in ((1, 0.07), (2, 0.035), (8, -0.07), (16, -0.105))])
    base = dense_space.baseline()
    history = []
    for threads in (1, 2):
        for mb, step in ((2, 1.7), (4, 1.0), (8, 0.58)):
            cand = dense_space.with_value(dense_space.with_value(base, "threads", threads), "micro_batch_size", mb)
            history.append(result(cand, step=step * (1.3 if threads == 1 else 1.0)))
    model = TimeModel(dense_space, shallow).fit(history)
    mb8, mb16 = (dense_space.with_value(base, "micro_batch_size", mb) for mb in (8, 16))
    pred = model.predict([mb8, mb16])
    # Not "micro-batch 16 is 10% faster than 4, give or take 10%" any more: the slope that said so
    # is wrong at 8, so 16 is wide open, and could well beat 8.
    assert {"micro_batch_size=8", "micro_batch_size=2"} <= model.miscalibrated
    assert pred.log_step_sd[1] > 0.5
    chance = p_gain(pred, pred.log_job[0])[1]
    assert chance > 4 * CONVERGED_CHANCE, chance


def test_a_knob_contradicted_above_its_default_keeps_its_priors_below_it(dense_space):
    # Micro-batch 8 runs far faster than the shallow slope said. That says the slope is wrong from
    # the default up (16 is open); it says nothing of 1 and 2, a regime no trial has touched, whose
    # priors (slower) stand: loosening them sent searches into aborted micro-batch 1 trials.
    shallow = PriorTable.of([Prior(key=f"micro_batch_size={mb}", time_log_mean=m, time_log_sd=0.1,
                                   mem_log_mean=0.0, mem_log_sd=0.1, source="test")
                             for mb, m in ((1, 0.07), (2, 0.035), (8, -0.035), (16, -0.07))])
    base = dense_space.baseline()
    history = []
    for threads in (1, 2):
        for mb, step in ((4, 1.0), (8, 0.58)):
            cand = dense_space.with_value(dense_space.with_value(base, "threads", threads), "micro_batch_size", mb)
            history.append(result(cand, step=step * (1.3 if threads == 1 else 1.0)))
    model = TimeModel(dense_space, shallow).fit(history)
    assert "micro_batch_size=8" in model.miscalibrated
    in_use = dict(zip(dense_space.setting_keys, zip(model.priors_in_use.mean, model.priors_in_use.sd, strict=True),
                      strict=True))
    assert in_use["micro_batch_size=16"][1] > 0.5
    assert in_use["micro_batch_size=1"] == pytest.approx((0.07, 0.1))
    assert in_use["micro_batch_size=2"] == pytest.approx((0.035, 0.1))
    pred = model.predict([dense_space.with_value(base, "micro_batch_size", mb) for mb in (1, 16)])
    assert pred.log_step_sd[0] < 0.3 < pred.log_step_sd[1]


def test_a_space_without_settings_still_fits():
    """Every knob fixed and no patch validated: the history holds the baseline and failed
    proposals, and the model must still answer (it once raised in the start-up fit)."""
    from infrarsi.search.space import SearchSpace
    from infrarsi.search.synthetic import contract_with, dense_knobs
    from infrarsi.trials import Candidate, TrialResult, TrialStatus

    fixed = [k for k in dense_knobs() if not k.tunable]
    space = SearchSpace.from_contract(contract_with(fixed), [])
    history = [TrialResult(status=TrialStatus.OK, candidate=Candidate(), step_times=[0.05] * 4, startup_s=3.0 + i)
               for i in range(3)]
    TimeModel(space).fit(history)
