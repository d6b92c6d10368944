"""ZeRO 2 and 3 move data every micro-batch: the time model holds that their cost per sample grows
as the micro-batch shrinks (``time_interactions``), so ZeRO 3 at a micro-batch no trial ran it
with is priced from trials at others."""

import math

import numpy as np
import pytest

from infrarsi.contract import Knob
from infrarsi.priors import PriorContext, builtin_table
from infrarsi.search.space import SearchSpace
from infrarsi.search.synthetic import contract_with, result
from infrarsi.search.time_interactions import time_interactions
from infrarsi.search.time_model import TimeModel
from infrarsi.trials import Candidate
from tests.priors.conftest import hardware

GIB = 2**30
TRAFFIC = 0.6
"""ZeRO 3's exposed traffic per micro-batch, as a share of micro-batch 1's compute."""


def _contract(*knobs: Knob):
    return contract_with(list(knobs) or [
        Knob(name="zero", role="fsdp", type="int", default=1, domain=[0, 1, 2, 3], tunable=True),
        Knob(name="mb", role="micro_batch", type="int", default=1, domain=[1, 2, 4], tunable=True)],
        global_batch=64, budget_bytes=80 * GIB)


def _candidate(**changes) -> Candidate:
    return Candidate(knobs={"zero": 1, "mb": 1, **changes})


def _true_step(knobs: dict) -> float:
    """Compute per sample falls a little with the micro-batch; ZeRO 3's traffic is per micro-batch."""
    mb = knobs["mb"]
    return (1.0 - 0.05 * math.log2(mb)) * (1 + (TRAFFIC / mb if knobs["zero"] == 3 else 0.0))


def test_a_column_per_per_micro_batch_stage_its_value_the_micro_batches_per_sample():
    space = SearchSpace.from_contract(_contract(), [])
    columns = time_interactions(space)
    rows = [_candidate(), _candidate(zero=3), _candidate(mb=4), _candidate(zero=3, mb=4), _candidate(zero=2, mb=2)]
    # Columns: ZeRO 2, ZeRO 3; at micro-batch m against the baseline's 1, 1/m micro-batches per sample.
    assert columns.features(space.indicator(rows)) == pytest.approx(np.array(
        [[0, 0], [0, 1], [0, 0], [0, 0.25], [0.5, 0]]))
    at_three = _contract(Knob(name="zero", role="fsdp", type="str", default="full_shard",
                              domain=["no_shard", "shard_grad_op", "full_shard"], tunable=True),
                         Knob(name="accum", role="grad_accum", type="int", default=2, domain=[1, 2, 4], tunable=True))
    space = SearchSpace.from_contract(at_three, [])
    rows = [Candidate(knobs={"zero": "full_shard", "accum": 2}), Candidate(knobs={"zero": "full_shard", "accum": 4}),
            Candidate(knobs={"zero": "shard_grad_op", "accum": 1}), Candidate(knobs={"zero": "no_shard", "accum": 4})]
    # Without a micro-batch knob, accumulation counts the micro-batches: 2 per step at the baseline.
    assert time_interactions(space).features(space.indicator(rows)) == pytest.approx(np.array(
        [[0, 1], [0, 2], [0.5, 0], [0, 0]]))


def test_none_without_a_per_micro_batch_stage_or_a_micro_batch():
    for knobs in ([Knob(name="zero", role="fsdp", type="int", default=0, domain=[0, 1], tunable=True),
                   Knob(name="mb", role="micro_batch", type="int", default=1, domain=[1, 2], tunable=True)],
                  [Knob(name="zero", role="fsdp", type="int", default=0, domain=[0, 3], tunable=True),
                   Knob(name="compile", role="compile", type="bool", default=False, domain=[False, True], tunable=True)]):
        assert time_interactions(SearchSpace.from_contract(_contract(*knobs), [])) is None


def test_zero_3_at_an_untried_micro_batch_is_priced_from_trials_at_others():
    contract = _contract()
    space = SearchSpace.from_contract(contract, [])
    priors = builtin_table(PriorContext(contract=contract, hardware=hardware("cuda")))
    measured = [_candidate(), _candidate(mb=2), _candidate(mb=4), _candidate(zero=3, mb=4), _candidate(zero=3, mb=2)]
    history = [result(c, step=_true_step(c.knobs)) for c in measured]
    untried = _candidate(zero=3)
    model = TimeModel(space, priors).fit(history)
    predicted = float(model.predict([untried]).log_step[0])
    truth = math.log(_true_step(untried.knobs))
    assert predicted == pytest.approx(truth, abs=0.08)
    # Additive, the model puts ZeRO 3 near its effect at micro-batches 2 and 4.
    additive = TimeModel(space, priors)
    additive.interactions = None
    assert truth - float(additive.fit(history).predict([untried]).log_step[0]) > 0.2
