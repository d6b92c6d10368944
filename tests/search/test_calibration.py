"""Live trials revise priors: a contradicted prior is flagged and stops steering."""

import math

import numpy as np
import pytest

from infrarsi.priors.types import Prior, PriorTable
from infrarsi.search.calibration import prior_checks
from infrarsi.search.synthetic import DENSE_MEM, DENSE_TIME, Surface
from infrarsi.search.time_model import TimeModel

# What an LLM says about bf16 (2x faster, fairly sure) and about threads (right).
PRIORS = PriorTable.of([
    Prior(key="dtype=bfloat16", time_log_mean=math.log(0.5), time_log_sd=0.3, mem_log_mean=math.log(0.5),
          mem_log_sd=0.2, source="llm:test"),
    Prior(key="threads=1", time_log_mean=math.log(1.7), time_log_sd=0.3, mem_log_mean=0.0, mem_log_sd=0.1,
          source="llm:test"),
])


def _history(space, n, seed=0):
    surface = Surface(space, DENSE_TIME, DENSE_MEM, base_peak=0.3 * space.budget_bytes, seed=seed)
    cands = [space.baseline()] + space.sample(np.random.default_rng(seed), n - 1)
    return [surface.run(c) for c in cands]


def test_a_contradicted_prior_is_flagged_and_dropped_from_the_mean(dense_space):
    history = _history(dense_space, 16)  # bf16 is 20x slower on this surface
    model = TimeModel(dense_space, PRIORS).fit(history)
    checks = {c.key: c for c in model.checks}
    assert checks["dtype=bfloat16"].miscalibrated
    assert checks["dtype=bfloat16"].observed == pytest.approx(DENSE_TIME["dtype=bfloat16"], abs=0.3)
    assert checks["dtype=bfloat16"].z > 2
    assert not checks["threads=1"].miscalibrated
    assert model.miscalibrated == {"dtype=bfloat16"}
    mean, sd = model.priors_in_use.mean, model.priors_in_use.sd
    i = dense_space.setting_keys.index("dtype=bfloat16")
    assert mean[i] == 0.0 and sd[i] > PRIORS.get("dtype=bfloat16").time_log_sd


def test_too_little_data_flags_nothing(dense_space):
    history = _history(dense_space, 16)
    # One bf16 trial is not enough to overrule a prior.
    few = [t for t in history if t.candidate.knobs["dtype"] == "float32"]
    few.append(next(t for t in history if t.candidate.knobs["dtype"] == "bfloat16"))
    checks = {c.key: c for c in TimeModel(dense_space, PRIORS).fit(few).checks}
    assert checks["dtype=bfloat16"].n_trials == 1
    assert checks["dtype=bfloat16"].z > 2  # the single trial disagrees, yet it is not enough
    assert not checks["dtype=bfloat16"].miscalibrated


def test_calibration_reports_time_and_memory(dense_space):
    history = _history(dense_space, 30, seed=4)
    checks = prior_checks(dense_space, PRIORS, history)
    by = {(c.key, c.quantity): c for c in checks}
    assert set(by) == {(k, q) for k in PRIORS for q in ("time", "memory")}
    assert by[("dtype=bfloat16", "time")].miscalibrated
    # The surface gives bf16 no memory saving: the prior's -50% is outside its band too.
    assert by[("dtype=bfloat16", "memory")].observed == pytest.approx(0.0, abs=0.1)
    assert by[("dtype=bfloat16", "memory")].miscalibrated
    assert not by[("threads=1", "memory")].miscalibrated
    row = by[("dtype=bfloat16", "time")].row()
    assert row.prior_mean == PRIORS.get("dtype=bfloat16").time_log_mean and row.source == "llm:test"
