"""A power-of-two knob's untried values follow the memory curve through its measured ones."""

import math

import numpy as np
import pytest

from infrarsi.contract import Knob
from infrarsi.priors.types import Prior, PriorTable
from infrarsi.search.memory_curve import Curve, fit_curve, refit_untried
from infrarsi.search.memory_model import MemoryModel
from infrarsi.search.space import SearchSpace
from infrarsi.search.synthetic import contract_with, result
from infrarsi.trials import Candidate, TrialStatus

MIB = 2**20
FIXED, PER_SEQUENCE = 20 * MIB, 12 * MIB
"""peak = FIXED + PER_SEQUENCE x micro-batch (x 0.5 with checkpointing): a 45% share at micro 2."""
BUDGET = 128 * MIB


def _space(knobs: list[Knob]) -> SearchSpace:
    return SearchSpace.from_contract(contract_with(knobs, budget_bytes=BUDGET), [])


MICRO = Knob(name="mb", role="micro_batch", type="int", default=2, domain=[1, 2, 4, 8, 16], tunable=True)
CKPT = Knob(name="ckpt", role="activation_checkpointing", type="bool", default=False, domain=[False, True],
            tunable=True)
THREADS = Knob(name="threads", role="threads", type="int", default=1, domain=[1, 2], tunable=True)


def _peak(knobs: dict) -> float:
    return FIXED + PER_SEQUENCE * knobs["mb"] * (0.5 if knobs.get("ckpt") else 1.0)


def _priors() -> PriorTable:
    """The built-in prior's shape with a 30% share (what it assumes on a CPU), fairly sure of it;
    threads cost no memory."""
    micro = [Prior(key=f"mb={v}", time_log_mean=0.0, time_log_sd=0.14, mem_log_mean=math.log(0.7 + 0.3 * v / 2),
                   mem_log_sd=0.14, source="test") for v in (1, 4, 8, 16)]
    return PriorTable.of([*micro, Prior(key="threads=2", time_log_mean=0.0, time_log_sd=0.05, mem_log_mean=0.0,
                                        mem_log_sd=0.05, source="test")])


def _predicted_peak(model: MemoryModel, space: SearchSpace, knobs: dict) -> float:
    mean, _ = model.predict(space.encode_many([Candidate(knobs=knobs)]))
    return math.exp(mean[0])


def test_measured_micro_batches_set_the_untried_ones_where_the_prior_was_far_off():
    space = _space([MICRO, CKPT, THREADS])
    # Micro-batch moves with other knobs (as the search's seeds do): their priors say "no memory".
    ran = [{"mb": 2, "ckpt": False, "threads": 1}, {"mb": 4, "ckpt": False, "threads": 2},
           {"mb": 8, "ckpt": False, "threads": 2}]
    history = [result(Candidate(knobs=k), step=1.0, peak=_peak(k)) for k in ran]
    model = MemoryModel(space, _priors()).fit(history)
    untried = {"mb": 16, "ckpt": False, "threads": 2}
    assert _predicted_peak(model, space, untried) == pytest.approx(_peak(untried), rel=0.05)
    # The prior alone puts it at 3.1x the default's peak, 40% short of the truth.
    assert _predicted_peak(MemoryModel(space, _priors()).fit(history[:1]), space, untried) < 0.7 * _peak(untried)


def test_an_oom_on_the_curve_leaves_its_memory_savers_in_reach():
    space = _space([MICRO, CKPT, THREADS])
    ran = [{"mb": 2, "ckpt": False, "threads": 1}, {"mb": 4, "ckpt": False, "threads": 2},
           {"mb": 8, "ckpt": False, "threads": 2}, {"mb": 8, "ckpt": True, "threads": 2}]
    history = [result(Candidate(knobs=k), step=1.0, peak=_peak(k)) for k in ran]
    history.append(result(Candidate(knobs={"mb": 16, "ckpt": False, "threads": 2}), TrialStatus.OOM, step=None))
    model = MemoryModel(space, _priors()).fit(history)
    oomed, saver = {"mb": 16, "ckpt": False, "threads": 2}, {"mb": 16, "ckpt": True, "threads": 2}
    # Where the OOM most likely peaked comes from the curve, not from the prior's 3.1x.
    assert _predicted_peak(model, space, oomed) == pytest.approx(_peak(oomed), rel=0.05)
    # The saver's truth is 116 MiB under a 128 MiB budget; the log-additive model prices
    # checkpointing as the fraction it saved at micro-batch 8, so it lands a little above.
    assert _predicted_peak(model, space, saver) == pytest.approx(_peak(saver), rel=0.15)
    assert model.p_fits(space.encode_many([Candidate(knobs=saver)]), BUDGET)[0] > 0.5


def test_the_shape_is_chosen_by_the_measured_values():
    ratios = np.array([1.0, 2.0])
    splits = Curve(grows=False, share=0.6).effect(ratios)
    curve, sse = min((fit_curve(ratios, splits, np.full(2, 0.02), grows) for grows in (True, False)),
                     key=lambda f: f[1])
    assert not curve.grows and curve.share == pytest.approx(0.6, abs=0.01) and sse < 1e-6


def test_a_knob_off_every_curve_keeps_its_priors():
    # Memory falls at 2x the default, then rises at 4x: neither shape goes through both.
    log2_ratio = np.array([1.0, 2.0, 3.0])
    effects = np.array([math.log(0.6), math.log(1.5), 0.0])
    mean, sd, known = np.array([0.3, 0.6, 0.9]), np.full(3, 0.2), np.ones(3, dtype=bool)
    changed = refit_untried(mean, sd, known, ["mb"] * 3, log2_ratio, np.array([True, True, False]),
                            effects, np.full(3, 0.02))
    assert not changed.any() and list(mean) == [0.3, 0.6, 0.9]
    # On the curve, the untried value moves onto it.
    effects = Curve(grows=True, share=0.5).effect(log2_ratio)
    changed = refit_untried(mean, sd, known, ["mb"] * 3, log2_ratio, np.array([True, True, False]),
                            effects, np.full(3, 0.02))
    assert list(changed) == [False, False, True] and mean[2] == pytest.approx(effects[2], abs=1e-3)
