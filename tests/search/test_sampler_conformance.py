"""Every strategy the run stage offers goes through the same motions on a synthetic surface: the
sampler is a ``Sampler``, each proposal is a valid, unmeasured candidate of the space (Optuna's
samplers excepted: they propose over each knob's whole domain, repeats included, as their users run
them), the search ends with a reason, and re-verification gets candidates from it."""

from __future__ import annotations

import pytest

from infrarsi.priors.types import PriorTable
from infrarsi.search.optuna_samplers import OPTUNA_SAMPLERS
from infrarsi.search.sampler import Sampler, rank_by_measurement
from infrarsi.search.space import SearchSpace
from infrarsi.search.strategy import MAKE_SAMPLER, SAMPLERS, PreparedStrategy, Strategy
from infrarsi.search.synthetic import DENSE_MEM, DENSE_TIME, Surface, contract_with, dense_knobs

TRIALS = 8


def test_every_strategy_name_has_a_sampler():
    assert set(SAMPLERS) == set(MAKE_SAMPLER)


@pytest.mark.parametrize("name", SAMPLERS)
def test_a_strategy_proposes_fresh_valid_candidates_and_ranks_what_it_measured(name):
    contract = contract_with(dense_knobs())
    space = SearchSpace.from_contract(contract, ["fused_qkv"])
    surface = Surface(space, DENSE_TIME, DENSE_MEM, base_peak=0.5 * space.budget_bytes)
    strategy = Strategy(name=name, contract=contract, priors=PriorTable(), priors_source="none")
    strategy = strategy.prepare(space)
    assert isinstance(strategy.sampler, Sampler)
    history = [surface.run(space.baseline())]
    for _ in range(TRIALS):
        proposal = strategy.propose(history)
        if proposal is None:
            assert strategy.stop_reason
            break
        assert proposal.reason
        if name not in OPTUNA_SAMPLERS:
            assert space.is_valid(proposal.candidate)
            assert proposal.candidate.key() not in {t.candidate.key() for t in history}
        history.append(surface.run(proposal.candidate))
    measured = {t.candidate.key() for t in history}
    assert all(c.key() in measured for c in strategy.top_candidates(history, 2))
    assert all(space.is_valid(c) for c in strategy.to_verify(history, 2))


def test_before_its_space_a_strategy_ranks_by_measurement_and_prepare_gives_it_its_space():
    contract = contract_with(dense_knobs())
    space = SearchSpace.from_contract(contract, ["fused_qkv"])
    surface = Surface(space, DENSE_TIME, DENSE_MEM, base_peak=0.5 * space.budget_bytes)
    strategy = Strategy(name="infrarsi", contract=contract, priors=PriorTable(), priors_source="none")
    history = [surface.run(c) for c in [space.baseline(), *space.neighbours(space.baseline())[:3]]]
    assert strategy.top_candidates(history, 2) == rank_by_measurement(history, 2, contract.workload.planned_steps)
    assert strategy.prior_checks(history) == strategy.bank_outcomes(history) == strategy.memory_prices(history) == []
    prepared = strategy.prepare(space)
    assert isinstance(prepared, PreparedStrategy) and prepared.space is space and prepared.priors is strategy.priors
    assert not hasattr(strategy, "space")  # the strategy given stays as it was
