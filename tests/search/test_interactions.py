"""Pairwise interactions: the kernel is the sum over pairs it claims to be, its priors cover the
library, and a strong interaction an additive model misses is found before the search stops.

The synthetic space is issue 53's: on a CPU with bf16 units bf16 autocast is 1.6x faster than
float32 alone and 1.5x slower than float32 together with the SDPA patch, which is faster alone.
"""

import itertools

import numpy as np
import pytest

from infrarsi.patches import REGISTRY
from infrarsi.priors.interactions import DEFAULT_PAIR_SD, PATCH_ROLES, pair_time_sd
from infrarsi.priors.types import Prior, PriorTable
from infrarsi.search.acquisition import p_gain
from infrarsi.search.infrarsi_sampler import InfraRSISampler
from infrarsi.search.interactions import PairKernel
from infrarsi.search.space import SearchSpace
from infrarsi.search.synthetic import DENSE_MEM, DENSE_PATCHES, Surface, contract_with, dense_knobs
from infrarsi.search.time_model import TimeModel
from infrarsi.trials import Candidate

PATCHES = ["sdpa_attention", "fused_qkv"]
SPACE = SearchSpace.from_contract(contract_with(dense_knobs()), PATCHES)
TIME = {"micro_batch_size=1": 0.31, "micro_batch_size=2": 0.12, "micro_batch_size=8": -0.06,
        "micro_batch_size=16": -0.10, "threads=1": 0.57, "activation_checkpointing=True": 0.17,
        "dtype=bfloat16": -0.45, "optimizer_impl=fused": -0.08, "compile=True": -0.05,
        "patch:sdpa_attention": -0.2, "patch:fused_qkv": -0.05}
PAIRS = {("dtype=bfloat16", "patch:sdpa_attention"): 0.9}
"""bf16 with SDPA: -0.45 - 0.2 + 0.9 = +0.25, slower than the baseline; bf16 alone -0.45."""


def _prior(key: str, time: float, sd: float) -> Prior:
    return Prior(key=key, time_log_mean=time, time_log_sd=sd, mem_log_mean=0.0, mem_log_sd=0.3, source="test")


PRIORS = PriorTable.of([
    _prior("dtype=bfloat16", -0.3, 0.3), _prior("patch:sdpa_attention", -0.2, 0.2),
    _prior("micro_batch_size=1", 0.1, 0.15), _prior("micro_batch_size=2", 0.05, 0.1),
    _prior("micro_batch_size=8", -0.05, 0.1), _prior("micro_batch_size=16", -0.1, 0.15),
    _prior("threads=1", 0.5, 0.3), _prior("activation_checkpointing=True", 0.2, 0.1),
    _prior("compile=True", 0.0, 0.08), _prior("optimizer_impl=foreach", -0.02, 0.04),
    _prior("optimizer_impl=fused", -0.03, 0.05), _prior("patch:fused_qkv", -0.05, 0.1),
])
"""Shaped like the built-in CPU table: bf16 believed faster, SDPA faster, nothing about the pair."""


def _surface(seed: int) -> Surface:
    return Surface(SPACE, TIME, DENSE_MEM, base_peak=0.3 * SPACE.budget_bytes, seed=seed, pair_effects=PAIRS)


def _with(**changes) -> Candidate:
    patches = changes.pop("patches", ())
    base = SPACE.baseline()
    return Candidate({**base.knobs, **changes}, tuple(patches))


def test_the_kernel_is_the_sum_over_pairs_of_dimensions():
    space = SearchSpace.from_contract(contract_with(dense_knobs()), DENSE_PATCHES)
    kernel = PairKernel.of(space)
    ind = space.indicator(space.sample(np.random.default_rng(0), 40))
    features = ind @ kernel.deltas
    brute = np.zeros((len(ind), len(ind)))
    for a, b in itertools.combinations(range(len(kernel.dims)), 2):
        var = kernel.sd(kernel.names[a], kernel.names[b]) ** 2
        ga, gb = (features[:, kernel.dims[d]] @ features[:, kernel.dims[d]].T for d in (a, b))
        brute += var * ga * gb
    assert np.allclose(kernel.cross(ind, ind), brute)
    assert np.allclose(kernel.diag(ind), np.diag(brute))
    assert np.linalg.eigvalsh(brute).min() > -1e-9
    # The pair issue 53 met is a likely one; two roles nobody linked get the default.
    assert kernel.sd("dtype", "patch:sdpa_attention") == pytest.approx(0.5)
    assert kernel.sd("threads", "optimizer_impl") == pytest.approx(DEFAULT_PAIR_SD)


def test_a_power_of_two_knob_interacts_by_a_trend_per_octave():
    space = SearchSpace.from_contract(contract_with(dense_knobs()), PATCHES)
    kernel = PairKernel.of(space)
    rows = space.indicator([Candidate({**space.baseline().knobs, "micro_batch_size": mb}, ("sdpa_attention",))
                            for mb in (2, 8, 16)])
    cov = kernel.cross(rows, rows)
    # Each value with SDPA: 16's pair wider than 8's; 8 and 16 move together, 2 against them.
    assert cov[2, 2] > cov[1, 1] > 0
    assert cov[1, 2] > 0 > cov[0, 1]


def test_every_library_patch_stands_for_a_role():
    assert set(REGISTRY) <= set(PATCH_ROLES)
    assert pair_time_sd("attention_impl", "dtype") == pair_time_sd("dtype", "attention_impl") == 0.5


def test_an_additive_model_condemns_bf16_everywhere_the_pairs_keep_it_open():
    """Issue 53's run 2: bf16 tried only with SDPA (micro-batch 4 and 8), both slow."""
    surface = _surface(seed=0)
    tried = [SPACE.baseline(), _with(patches=["sdpa_attention"]),
             _with(dtype="bfloat16", patches=["sdpa_attention"]),
             _with(dtype="bfloat16", micro_batch_size=8, patches=["sdpa_attention"]),
             _with(micro_batch_size=8, patches=["sdpa_attention"]),
             _with(micro_batch_size=8, optimizer_impl="fused", patches=["sdpa_attention"])]
    history = [surface.run(c) for c in tried]
    alone = _with(dtype="bfloat16")
    assert surface.job_s(alone) < min(surface.job_s(c) for c in tried)
    chances, sds = {}, {}
    for pairs in (False, True):
        model = TimeModel(SPACE, PRIORS, interactions=pairs).fit(history)
        best = float(np.min(model.predict(tried).log_job))
        pred = model.predict([alone])
        chances[pairs], sds[pairs] = float(p_gain(pred, best)[0]), float(pred.log_step_sd[0])
        # bf16's prior (0.74x) is contradicted either way, and loosened: its own effect is unknown.
        assert "dtype=bfloat16" in model.miscalibrated
    # Additive: bf16 is what bf16 with SDPA showed, everywhere, and sure of it.
    assert chances[False] < 1e-6 and sds[False] < 0.05, (chances, sds)
    # With the pair (prior sd 0.5), the slowness may be the pair's: bf16 alone, a combination no
    # trial has touched, keeps a wide posterior with a real chance of beating the best. (The
    # search's convergence rule does not rely on it alone: see the test after the next.)
    assert sds[True] > 0.25 and chances[True] > 1e-3, (chances, sds)


@pytest.mark.parametrize("seed", range(4))
def test_the_search_finds_the_interactions_optimum_and_does_not_converge_before_trying_it(seed):
    surface = _surface(seed)
    optimum = surface.optimum()
    assert optimum.knobs["dtype"] == "bfloat16" and "sdpa_attention" not in optimum.patches
    sampler, history = InfraRSISampler(SPACE, PRIORS, seed=seed), []
    while len(history) < 30 and (proposal := sampler.ask(history)) is not None:
        history.append(surface.run(proposal.candidate))
    keys = [t.candidate.key() for t in history]
    assert optimum.key() in keys, [SPACE.settings(t.candidate) for t in history]
    assert keys.index(optimum.key()) < 12
    if sampler.stop_reason:
        assert sampler.stop_reason.startswith("converged"), sampler.stop_reason
    # Nowhere along the way did the search declare convergence before trying the optimum.
    for n in range(5, keys.index(optimum.key()) + 1):
        assert InfraRSISampler(SPACE, PRIORS, seed=seed).ask(history[:n]) is not None, n


def _search(sampler: InfraRSISampler, surface: Surface, history: list, limit: int = 30) -> list:
    history = list(history)
    while len(history) < limit and (proposal := sampler.ask(history)) is not None:
        history.append(surface.run(proposal.candidate))
        history[-1].detail = proposal.reason
    return history


def test_a_slow_setting_against_its_prior_is_tried_in_another_context_before_converging(monkeypatch):
    """The additive model calls bf16 slow everywhere; the search still tries it without SDPA."""
    surface = _surface(seed=1)
    start = [surface.run(c) for c in (SPACE.baseline(), _with(patches=["sdpa_attention"]),
                                      _with(dtype="bfloat16", patches=["sdpa_attention"]),
                                      _with(dtype="bfloat16", micro_batch_size=8, patches=["sdpa_attention"]))]

    def bf16_alone(history):
        return [t for t in history if t.candidate.knobs["dtype"] == "bfloat16" and "sdpa_attention" not in
                t.candidate.patches]

    # The premise: without the rule, the additive search converges having tried bf16 only with SDPA.
    monkeypatch.setattr(InfraRSISampler, "_one_context", lambda self, *args: None)
    plain = InfraRSISampler(SPACE, PRIORS, pairs=False)
    history = _search(plain, surface, start)
    assert plain.stop_reason.startswith("converged") and not bf16_alone(history), plain.stop_reason
    monkeypatch.undo()
    guarded = InfraRSISampler(SPACE, PRIORS, pairs=False)
    history = _search(guarded, surface, start)
    tried = bf16_alone(history)
    assert tried, [SPACE.settings(t.candidate) for t in history]
    assert "not converged: dtype=bfloat16 measured" in tried[0].detail, tried[0].detail
    assert "only with patch:sdpa_attention" in tried[0].detail
    # Once it has, bf16 is no longer condemned everywhere: the search goes on to the optimum.
    assert surface.optimum().key() in {t.candidate.key() for t in history}
