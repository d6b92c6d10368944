"""Optuna's samplers behind ``ask(history)``: the proposals they make over their own study are the
ones they made driving the run's study (asked there, every trial told), OOM is a constraint for GP
on every trial, and a proposal outside the space is given back when asked to."""

from __future__ import annotations

import optuna
import pytest

from infrarsi.contract import Knob
from infrarsi.experiment.store import TrialStore, distributions
from infrarsi.search.optuna_samplers import OptunaSampler
from infrarsi.search.space import SearchSpace
from infrarsi.search.synthetic import DENSE_MEM, DENSE_TIME, Surface, contract_with, dense_knobs
from infrarsi.trials import TrialResult, TrialStatus

PATCHES = ["fused_qkv"]


def _setup():
    contract = contract_with(dense_knobs())
    space = SearchSpace.from_contract(contract, PATCHES)
    return contract, space, Surface(space, DENSE_TIME, DENSE_MEM, base_peak=0.5 * space.budget_bytes)


@pytest.mark.parametrize("name", ["tpe", "gp"])
def test_the_proposals_are_those_of_optunas_sampler_driving_the_study(name):
    contract, space, surface = _setup()
    # As the run's study was driven: the baseline created with its params, then Optuna asked and
    # every trial told, OOM a constraint on each for GP.
    factory = {"tpe": optuna.samplers.TPESampler, "gp": optuna.samplers.GPSampler}[name]
    driven = optuna.create_study(direction="minimize", sampler=factory(seed=3))
    store = TrialStore(driven, contract, PATCHES)
    sampler = OptunaSampler(name, space, contract, PATCHES, seed=3)
    history, asked = [], []
    for i in range(12):
        if i == 0:
            trial = store.begin(space.baseline(), "baseline")
        else:
            trial = driven.ask(distributions(contract, PATCHES))
            proposal = sampler.ask(history)
            assert proposal is not None and proposal.reason == f"optuna {name}"
            asked.append((store.candidate_of(trial).key(), proposal.candidate.key()))
        result = surface.run(store.candidate_of(trial))
        if name == "gp":
            trial.set_constraint("memory", float(result.peak_bytes - contract.memory.budget_bytes
                                                 if result.status is TrialStatus.OOM else -1))
        store.finish(trial, result)
        history.append(result)
    assert [a for a, _ in asked] == [b for _, b in asked]


def test_gp_learns_oom_as_a_constraint_on_every_trial():
    contract, space, surface = _setup()
    sampler = OptunaSampler("gp", space, contract, PATCHES, seed=0)
    base = space.baseline()
    oom = TrialResult(TrialStatus.OOM, space.neighbours(base)[0], peak_bytes=2 * space.budget_bytes)
    history = [surface.run(base), oom]
    assert sampler.ask(history) is not None
    # Optuna's constraint convention: feasible at zero or less, so an OOM is positive (the excess).
    constraints = [t.constraints for t in sampler._study.trials]
    assert constraints[0] == {"memory": -1.0} and constraints[1]["memory"] > 0
    assert len(constraints) == 3  # the asked trial, told when the history brings its result


def test_a_proposal_outside_the_space_is_given_back_only_when_asked_to():
    # Coupled knobs: micro-batch x accumulation x processes must keep the global batch, which most
    # points of the knobs' product do not.
    contract = contract_with([
        Knob(name="micro", role="micro_batch", type="int", default=16, domain=[1, 2, 4, 8, 16], tunable=True),
        Knob(name="accum", role="grad_accum", type="int", default=1, domain=[1, 2, 4, 8, 16], tunable=True),
        Knob(name="nproc", role="nproc_per_node", type="int", default=1, domain=[1, 2], tunable=True),
    ], global_batch=16)
    space = SearchSpace.from_contract(contract, [])
    history = [TrialResult(TrialStatus.OK, space.baseline(), step_times=[0.1] * 3, wall_s=1.0)]
    keeps = OptunaSampler("tpe", space, contract, [], seed=0)
    rejects = OptunaSampler("tpe", space, contract, [], seed=0, max_rejected=50)
    kept = [keeps.ask(history).candidate for _ in range(10)]
    assert not all(space.is_valid(c) for c in kept) and keeps.rejected == 0
    given_back = 0
    for _ in range(10):
        assert space.is_valid(rejects.ask(history).candidate)
        given_back += rejects.rejected
    assert given_back > 0
