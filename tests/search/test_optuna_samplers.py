"""Optuna's samplers behind ``ask(history)``: the proposals they make over their own study are the
ones a careful user's study makes (asked there, every trial told), OOM is a penalised complete trial
with a violated constraint that steers them away from its neighbours, and a proposal outside the
space is given back when asked to."""

from __future__ import annotations

import optuna
import pytest

from infrarsi.contract import Knob
from infrarsi.priors.types import PriorTable
from infrarsi.search.optuna_samplers import OOM_PENALTY, OPTUNA_SAMPLERS, STARTUP_TRIALS, OptunaSampler
from infrarsi.search.space import SearchSpace
from infrarsi.search.strategy import Strategy
from infrarsi.search.synthetic import DENSE_MEM, DENSE_TIME, Surface, contract_with, dense_knobs
from infrarsi.study_codec import distributions, from_params, memory_constraint, outcome, to_params
from infrarsi.trials import TrialResult, TrialStatus

PATCHES = ["fused_qkv"]


def _setup():
    contract = contract_with(dense_knobs())
    space = SearchSpace.from_contract(contract, PATCHES)
    return contract, space, Surface(space, DENSE_TIME, DENSE_MEM, base_peak=0.5 * space.budget_bytes)


@pytest.mark.parametrize("name", ["tpe", "gp"])
def test_the_proposals_are_those_of_optunas_sampler_driving_the_study(name):
    contract, space, surface = _setup()
    # As a careful user drives Optuna: the baseline added first, then each trial asked and told, its
    # memory constraint set, an OOM complete at twice the slowest job measured before it.
    driven = optuna.create_study(direction="minimize", sampler=OPTUNA_SAMPLERS[name](3))
    dists = distributions(contract, PATCHES)
    sampler = OptunaSampler(name, space, contract, PATCHES, seed=3)
    history, asked, slowest = [], [], 0.0
    for i in range(12):
        if i == 0:
            trial, candidate = None, space.baseline()
        else:
            trial = driven.ask(dists)
            proposal = sampler.ask(history)
            assert proposal is not None and proposal.reason == f"optuna {name}"
            candidate = from_params(trial.params)
            asked.append((candidate.key(), proposal.candidate.key()))
        result = surface.run(candidate)
        state, value = outcome(result, contract)
        slowest = max(slowest, value or 0.0)
        if result.status is TrialStatus.OOM:
            state, value = optuna.trial.TrialState.COMPLETE, OOM_PENALTY * slowest
        constraint = {"memory": memory_constraint(result, contract)}
        if trial is None:
            driven.add_trial(optuna.trial.create_trial(state=state, value=value,
                                                       params=to_params(candidate, contract, PATCHES),
                                                       distributions=dists, constraints=constraint))
        else:
            trial.set_constraint("memory", constraint["memory"])
            driven.tell(trial, value, state=state)
        history.append(result)
    assert [a for a, _ in asked] == [b for _, b in asked]


def _ooms_after_startup(name: str, seeds: int = 4) -> int:
    """OOM trials past the start-up ones over 20-trial searches of a space where the largest
    micro-batch never fits."""
    contract, space, _ = _setup()
    ooms = 0
    for seed in range(seeds):
        surface = Surface(space, DENSE_TIME, DENSE_MEM, base_peak=0.5 * space.budget_bytes, seed=seed)
        strategy = Strategy(name=name, contract=contract, priors=PriorTable(), priors_source="none", seed=seed)
        strategy = strategy.prepare(space)
        history = [surface.run(space.baseline())]
        for _ in range(19):
            proposal = strategy.propose(history)
            if proposal is None:
                break
            history.append(surface.run(proposal.candidate))
        ooms += sum(t.status is TrialStatus.OOM for t in history[1 + STARTUP_TRIALS:])
    return ooms


@pytest.mark.parametrize("name", ["tpe", "gp"])
def test_a_peer_that_sees_an_oom_avoids_its_neighbours(name):
    """Told each OOM as a penalised, infeasible trial, Optuna's samplers run into the memory wall
    less often after their start-up trials than random search does by chance."""
    assert _ooms_after_startup(name) < _ooms_after_startup("random")


def test_oom_is_a_constraint_on_every_trial():
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
