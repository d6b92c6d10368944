"""ZeRO 2 and 3 move parameters every micro-batch: the time model holds that their cost per sample
grows as the micro-batch shrinks, in proportion to the parameters that move (``time_interactions``),
so ZeRO 3 at a micro-batch no trial ran it with is priced from trials at others."""

import math
from dataclasses import replace

import numpy as np
import pytest

from infrarsi.contract import Knob
from infrarsi.priors import PriorContext, builtin_table
from infrarsi.search.space import SearchSpace
from infrarsi.search.synthetic import contract_with, result
from infrarsi.search.time_interactions import moved_share, time_interactions
from infrarsi.search.time_model import TimeModel
from infrarsi.trials import Candidate
from tests.priors.conftest import hardware

GIB = 2**30
GPUS = 8
TRAFFIC = 0.6
"""ZeRO 3's exposed traffic per micro-batch, as a share of micro-batch 1's compute."""
ZERO = Knob(name="zero", role="fsdp", type="int", default=1, domain=[0, 1, 2, 3], tunable=True)
MICRO = Knob(name="mb", role="micro_batch", type="int", default=1, domain=[1, 2, 4], tunable=True)


def _contract(*knobs: Knob):
    return contract_with(list(knobs) or [ZERO, MICRO], global_batch=64, budget_bytes=80 * GIB)


def _gpus(device: str = "cuda"):
    return replace(hardware(device), gpu_count=GPUS) if device == "cuda" else hardware(device)


def _candidate(**changes) -> Candidate:
    return Candidate(knobs={"zero": 1, "mb": 1, **changes})


def _true_step(knobs: dict) -> float:
    """Compute per sample falls a little with the micro-batch; ZeRO 3's traffic is per micro-batch."""
    mb = knobs["mb"]
    return (1.0 - 0.05 * math.log2(mb)) * (1 + (TRAFFIC / mb if knobs["zero"] == 3 else 0.0))


def test_a_column_per_per_micro_batch_stage_its_value_the_micro_batches_per_sample():
    contract = _contract()
    space = SearchSpace.from_contract(contract, [])
    columns = time_interactions(space, _gpus(), contract)
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
    assert time_interactions(space, _gpus(), at_three).features(space.indicator(rows)) == pytest.approx(np.array(
        [[0, 1], [0, 2], [0.5, 0], [0, 0]]))


def test_what_moves_is_the_parameters_shared_with_other_data_parallel_ranks():
    experts = Knob(name="ep", role="expert_parallel", type="int", default=1, domain=[1, 2, 8], tunable=True)
    tp = Knob(name="tp", role="tensor_parallel", type="int", default=1, domain=[1, 8], tunable=True)
    moe = _contract(ZERO, MICRO, experts, tp)
    hw = _gpus()
    # Every expert on its own GPU: only the dense tenth moves; at ep 2 their halves move too.
    assert moved_share({"expert_parallel": 8}, hw, moe) == pytest.approx(0.1)
    assert moved_share({"expert_parallel": 2}, hw, moe) == pytest.approx(0.1 + 0.9 / 2)
    assert moved_share({}, hw, moe) == pytest.approx(1.0)
    # tp 8 on 8 GPUs leaves no data-parallel rank to move anything to.
    assert moved_share({"tensor_parallel": 8}, hw, moe) == 0.0
    space = SearchSpace.from_contract(moe, [])
    rows = [Candidate(knobs={"zero": 3, "mb": 2, "ep": 8, "tp": 1}), Candidate(knobs={"zero": 3, "mb": 1, "ep": 1, "tp": 8})]
    assert time_interactions(space, hw, moe).features(space.indicator(rows))[:, 1] == pytest.approx([0.05, 0.0])


def test_none_off_a_gpu_or_without_a_per_micro_batch_stage_or_a_micro_batch():
    contract = _contract()
    assert time_interactions(SearchSpace.from_contract(contract, []), _gpus("cpu"), contract) is None
    for knobs in ([Knob(name="zero", role="fsdp", type="int", default=0, domain=[0, 1], tunable=True), MICRO],
                  [Knob(name="zero", role="fsdp", type="int", default=0, domain=[0, 3], tunable=True),
                   Knob(name="compile", role="compile", type="bool", default=False, domain=[False, True], tunable=True)]):
        contract = _contract(*knobs)
        assert time_interactions(SearchSpace.from_contract(contract, []), _gpus(), contract) is None


def test_zero_3_at_an_untried_micro_batch_is_priced_from_trials_at_others():
    contract = _contract()
    space = SearchSpace.from_contract(contract, [])
    priors = builtin_table(PriorContext(contract=contract, hardware=_gpus()))
    measured = [_candidate(), _candidate(mb=2), _candidate(mb=4), _candidate(zero=3, mb=4), _candidate(zero=3, mb=2)]
    history = [result(c, step=_true_step(c.knobs)) for c in measured]
    untried = _candidate(zero=3)
    truth = math.log(_true_step(untried.knobs))

    def predicted(interactions) -> float:
        return float(TimeModel(space, priors, interactions=interactions).fit(history).predict([untried]).log_step[0])

    assert predicted(time_interactions(space, _gpus(), contract)) == pytest.approx(truth, abs=0.08)
    # Additive, the model puts ZeRO 3 near its effect at micro-batches 2 and 4.
    assert truth - predicted(None) > 0.2
