"""The simulated search spaces: every point obeys the cluster's rules, the sizes are what the
benchmark needs, and the knobs reach InfraRSI with the roles its catalog gives their names.

The rules are checked here from their definitions, not through ``bench.sim.model.invalid``, so
a rule the space forgets fails the test.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from bench.sim.space import EP, MICRO, PP, ROLES, SP, SPACES, TP, VPP, ZERO, SimSpace, job_s, optimum
from infrarsi.knobs.catalog import classify
from infrarsi.knobs.raw import RawKnob
from infrarsi.trials import Candidate


@pytest.fixture(scope="module", params=list(SPACES))
def space(request) -> SimSpace:
    return SimSpace(SPACES[request.param])


def test_every_enumerated_point_obeys_the_rules(space):
    w = space.workload
    model, gpus, batch = w.model, w.cluster.gpus, w.global_batch
    for cand in space.all_candidates():
        k = cand.knobs
        tp, pp, vpp, micro, zero = k[TP], k[PP], k[VPP], k[MICRO], k[ZERO]
        assert gpus % (tp * pp) == 0
        dp = gpus // (tp * pp)
        assert tp * pp * dp == gpus
        assert model.heads % tp == 0 and model.kv % tp == 0 and model.ffn_size % tp == 0
        assert model.layers % pp == 0 and model.layers % (pp * vpp) == 0
        assert vpp == 1 or pp > 1
        assert batch % (micro * dp) == 0, "the accumulation must hold the global batch"
        assert zero in (0, 1) or pp == 1
        assert not k[SP] or tp > 1
        ep = k.get(EP, 1)
        assert ep == 1 or (model.experts % ep == 0 and dp % ep == 0)


def test_sizes_are_within_the_benchmarks_range_and_part_does_not_fit(space):
    best = optimum(space)
    print(f"{space.workload.name}: {best.valid} valid, {best.fits} fit")
    assert 1_000 <= best.valid <= 20_000
    assert 0 < best.fits < best.valid, "a space without an infeasible region tests no memory model"
    # A constrained space: most of the flat product of the knobs' domains is not valid.
    assert best.valid < math.prod(len(k.domain) for k in space.knobs)


def test_the_baseline_runs_and_the_optimum_is_the_fastest_point(space):
    best = optimum(space)
    assert space.is_valid(space.baseline())
    assert math.isfinite(best.baseline_job_s) and best.job_s <= best.baseline_job_s
    rng = np.random.default_rng(0)
    for cand in space.sample(rng, 200):
        assert job_s(space.workload.simulate(cand.knobs)) >= best.job_s


def test_conditional_dimensions_take_one_value_where_they_mean_nothing():
    space = SimSpace(SPACES["7b-8xh100"])
    base = space.baseline().knobs  # tp 8, pp 1
    assert not space.is_valid(Candidate({**base, TP: 1, SP: True}))
    assert not space.is_valid(Candidate({**base, VPP: 2}))
    assert not space.is_valid(Candidate({**base, TP: 4, PP: 2, ZERO: 3}))
    assert not space.is_valid(Candidate({**base, TP: 8, PP: 2}))  # 16 GPUs' worth on 8
    assert space.is_valid(Candidate({**base, TP: 4, PP: 2, VPP: 2, ZERO: 1}))
    assert space.is_valid(Candidate({**base, ZERO: 3}))  # ZeRO-3 excludes nothing with pp = 1
    assert not space.is_valid(Candidate(base, ("sdpa_attention",)))


def test_sampling_and_neighbours_stay_in_the_valid_space():
    space = SimSpace(SPACES["moe-8xh200"])
    drawn = space.sample(np.random.default_rng(1), 300)
    assert len({c.key() for c in drawn}) == 300 and all(space.is_valid(c) for c in drawn)
    for cand in drawn[:20]:
        assert all(space.is_valid(n) for n in space.neighbours(cand))
    assert len(space.enumerated().keys) == space.size()


def test_knob_roles_are_the_catalogs_reading_of_the_names():
    names = list(ROLES)
    for name, role in ROLES.items():
        knob = RawKnob(name=name, type="int", default=1)
        assert classify(knob, names).role == role, name
    contract = SimSpace(SPACES["70b-64xa100"]).workload.contract()
    assert {k.name: k.role for k in contract.knobs} == {n: ROLES[n] for n in SPACES["70b-64xa100"].domains}
    assert contract.memory.device == "cuda" and contract.memory.budget_bytes == 80 * 2**30
