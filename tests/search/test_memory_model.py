"""The censored (Tobit) memory model recovers known prices; treating OOMs as observed does not."""

import math

import numpy as np
import pytest

from infrarsi.contract import Knob
from infrarsi.priors.types import Prior, PriorTable
from infrarsi.search.memory_model import MemoryModel, memory_data
from infrarsi.search.space import SearchSpace
from infrarsi.search.synthetic import contract_with, result
from infrarsi.trials import TrialStatus

# Six binary/categorical feature columns: two bools, one binary str, one 3-way str (two columns), a patch.
PRICES = {
    "ckpt=True": -0.35,
    "compile=True": 0.30,
    "dtype=bfloat16": -0.45,
    "opt=foreach": 0.25,
    "opt=fused": 0.55,
    "patch:big_buffers": 0.40,
}
BASE_LOG_PEAK = math.log(600e6)
NOISE = 0.03


def _space(budget: int) -> SearchSpace:
    return SearchSpace.from_contract(contract_with([
        Knob(name="ckpt", role="activation_checkpointing", type="bool", default=False, domain=[False, True],
             tunable=True),
        Knob(name="compile", role="compile", type="bool", default=False, domain=[False, True], tunable=True),
        Knob(name="dtype", role="dtype", type="str", default="float32", domain=["float32", "bfloat16"],
             tunable=True),
        Knob(name="opt", role="optimizer_impl", type="str", default="loop", domain=["loop", "foreach", "fused"],
             tunable=True),
    ], budget_bytes=budget), ["big_buffers"])


def _data(seed: int):
    """60 trials; the budget sits where ~30% of true peaks exceed it (those trials are OOMs)."""
    rng = np.random.default_rng(seed)
    probe = _space(10**9)
    cands = probe.all_candidates()
    picks = [cands[i] for i in rng.integers(len(cands), size=60)]
    log_peaks = np.array([BASE_LOG_PEAK + sum(PRICES[k] for k in probe.settings(c)) for c in picks])
    log_peaks += rng.normal(0, NOISE, len(picks))
    budget = int(math.exp(np.quantile(log_peaks, 0.70)))
    space = _space(budget)
    history = [
        result(c, TrialStatus.OOM) if lp > math.log(budget) else result(c, step=1.0, peak=math.exp(lp))
        for c, lp in zip(picks, log_peaks, strict=True)
    ]
    return space, history, log_peaks


def _worst_relative_error(space: SearchSpace, effects: np.ndarray) -> float:
    fitted = dict(zip(space.setting_keys, effects, strict=True))
    return max(abs(fitted[k] - v) / abs(v) for k, v in PRICES.items())


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_tobit_recovers_known_prices_within_ten_percent(seed):
    space, history, _ = _data(seed)
    n_oom = sum(t.status is TrialStatus.OOM for t in history)
    assert 15 <= n_oom <= 21  # ~30% censored
    model = MemoryModel(space).fit(history)
    effects, sds = model.setting_effects()
    assert _worst_relative_error(space, effects) < 0.10
    assert model.sigma == pytest.approx(NOISE, rel=0.4)
    assert model.intercept == pytest.approx(BASE_LOG_PEAK, abs=0.05)
    assert np.all(sds < 0.05)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_treating_ooms_as_observed_at_the_budget_misses_the_prices(seed):
    """The same data with the censoring ignored: the likelihood matters, not just the regression."""
    space, history, _ = _data(seed)
    model = MemoryModel(space).fit(history)
    naive = MemoryModel(space).fit_arrays(model.data.indicator @ space.setting_deltas, model.data.y,
                                          np.zeros(len(model.data.y), dtype=bool))
    effects, _ = naive.setting_effects()
    assert _worst_relative_error(space, effects) > 0.10


def test_ooms_alone_move_the_model_above_the_budget():
    space, history, _ = _data(0)
    model = MemoryModel(space).fit(history)
    ooms = [t.candidate for t in history if t.status is TrialStatus.OOM]
    fits = [t.candidate for t in history if t.ok]
    p_oom = model.p_fits(space.encode_many(ooms), space.budget_bytes)
    p_ok = model.p_fits(space.encode_many(fits), space.budget_bytes)
    assert p_oom.mean() < 0.3 < 0.7 < p_ok.mean()


def test_prices_in_percent_and_bytes_at_the_baseline():
    space, history, _ = _data(1)
    prices = {p.key: p for p in MemoryModel(space).fit(history).prices()}
    ckpt = prices["ckpt=True"]
    assert ckpt.pct == pytest.approx(100 * math.expm1(PRICES["ckpt=True"]), abs=3.0)
    assert ckpt.bytes_at_baseline == pytest.approx(600e6 * math.expm1(PRICES["ckpt=True"]), rel=0.1)
    assert prices["opt=fused"].bytes_at_baseline > 0 > ckpt.bytes_at_baseline


def test_a_prior_steers_an_unmeasured_setting_and_data_override_it():
    space, history, _ = _data(2)
    wrong = PriorTable.of([Prior(key="patch:big_buffers", time_log_mean=0.0, time_log_sd=0.2,
                                 mem_log_mean=-0.5, mem_log_sd=0.1, source="test")])
    without_patch = [t for t in history if "big_buffers" not in t.candidate.patches]
    effects, _ = MemoryModel(space, wrong).fit(without_patch).setting_effects()
    assert effects[space.setting_keys.index("patch:big_buffers")] == pytest.approx(-0.5, abs=0.05)
    effects, _ = MemoryModel(space, wrong).fit(history).setting_effects()
    assert effects[space.setting_keys.index("patch:big_buffers")] == pytest.approx(0.40, rel=0.1)


def test_a_tight_prior_the_data_contradict_stops_steering():
    space, history, _ = _data(3)
    # Sure that compile costs no memory (sd 3%): 60 trials say +30% (PRICES), OOMs included.
    sure = PriorTable.of([Prior(key="compile=True", time_log_mean=0.0, time_log_sd=0.2,
                                mem_log_mean=0.0, mem_log_sd=0.03, source="test")])
    model = MemoryModel(space, sure).fit(history)
    assert model.contradicted == {"compile=True"}
    effects, _ = model.setting_effects()
    assert effects[space.setting_keys.index("compile=True")] == pytest.approx(PRICES["compile=True"], rel=0.15)
    # A prior the data agree with keeps steering.
    agreeing = PriorTable.of([Prior(key="compile=True", time_log_mean=0.0, time_log_sd=0.2,
                                    mem_log_mean=0.3, mem_log_sd=0.05, source="test")])
    assert MemoryModel(space, agreeing).fit(history).contradicted == set()


def test_a_run_stopped_after_its_steady_steps_measured_its_peak_and_one_stopped_before_bounds_it():
    """A trial aborted slow after a few steps had reached the peak every later step repeats (the
    README job's bf16: 0.38 GiB against the baseline's 0.45); one stopped in its first step had not."""
    space = _space(10**9)
    base = space.baseline()
    bf16 = space.with_value(base, "dtype", "bfloat16")
    slow = result(bf16, TrialStatus.ABORTED_SLOW, step=3.0, peak=0.38e9)
    early = result(bf16, TrialStatus.CRASH, peak=0.38e9)
    early.warmup_times = [3.0]
    data = memory_data(space, [result(base, step=1.0, peak=0.45e9), slow, early])
    assert data.censored.tolist() == [False, False, True]
    priors = PriorTable.of([Prior(key="dtype=bfloat16", time_log_mean=0.0, time_log_sd=0.3, mem_log_mean=0.5,
                                  mem_log_sd=0.3, source="test")])
    for trials, cheaper in (([slow], True), ([early], False)):
        model = MemoryModel(space, priors).fit([result(base, step=1.0, peak=0.45e9), *trials])
        effect = dict(zip(space.setting_keys, model.setting_effects()[0], strict=True))["dtype=bfloat16"]
        assert bool(effect < 0) is cheaper, (trials[0].status, effect)
