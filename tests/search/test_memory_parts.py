"""A peak as the sum of a state part and an activations part: the memory model prices a
combination of settings never measured together where the additive model cannot."""

import math

import pytest

from infrarsi.contract import Knob
from infrarsi.priors.types import Prior, PriorTable
from infrarsi.search.memory_model import MemoryModel
from infrarsi.search.space import SearchSpace
from infrarsi.search.synthetic import contract_with, result
from infrarsi.trials import Candidate

GIB = 2**30
STATE, ACTIVATIONS = 40 * GIB, 4 * GIB
"""The baseline (micro-batch 1, full recomputation, one pipeline stage): state-bound."""
RECOMPUTED = 0.05
"""Full recomputation keeps a twentieth of the activations."""


def _knobs() -> list[Knob]:
    return [
        Knob(name="mb", role="micro_batch", type="int", default=1, domain=[1, 2, 4, 8], tunable=True),
        Knob(name="ckpt", role="activation_checkpointing", type="bool", default=True, domain=[True, False],
             tunable=True),
        Knob(name="pp", role="pipeline_parallel", type="int", default=1, domain=[1, 2, 4], tunable=True),
    ]


def _space() -> SearchSpace:
    return SearchSpace.from_contract(contract_with(_knobs(), global_batch=8, budget_bytes=200 * GIB), [])


def _true_peak(knobs: dict) -> float:
    activations = ACTIVATIONS * knobs["mb"] * (1.0 if knobs["ckpt"] else 1 / RECOMPUTED)
    return STATE / knobs["pp"] + activations


def _candidate(**changes) -> Candidate:
    return Candidate(knobs={"mb": 1, "ckpt": True, "pp": 1, **changes})


def _priors(parted: bool) -> PriorTable:
    """The same whole-peak beliefs (at the baseline's mix), with or without the part each scales."""
    share = ACTIVATIONS / (STATE + ACTIVATIONS)
    rows = [("mb=2", "activations", math.log(2)), ("mb=4", "activations", math.log(4)),
            ("mb=8", "activations", math.log(8)), ("ckpt=False", "activations", -math.log(RECOMPUTED)),
            ("pp=2", "state", -math.log(2)), ("pp=4", "state", -math.log(4))]
    priors = []
    for key, part, own in rows:
        mix = share if part == "activations" else 1 - share
        whole = math.log1p(mix * math.expm1(own))
        extra = {"mem_part": part, "mem_part_log_mean": own, "mem_part_log_sd": 0.3} if parted else {}
        priors.append(Prior(key=key, time_log_mean=0.0, time_log_sd=0.2, mem_log_mean=whole, mem_log_sd=0.3,
                            source="test", **extra))
    return PriorTable.of(priors)


def _history():
    """Measured one setting at a time: micro-batch 4, no recomputation, two stages."""
    measured = [_candidate(), _candidate(mb=4), _candidate(ckpt=False), _candidate(pp=2)]
    return [result(c, step=1.0, peak=_true_peak(c.knobs)) for c in measured]


def _predicted_gib(model: MemoryModel, space: SearchSpace, candidate: Candidate) -> float:
    return math.exp(model.predict(space.encode_many([candidate]))[0][0]) / GIB


@pytest.mark.parametrize("untried", [dict(mb=8, ckpt=False), dict(mb=8, pp=4), dict(ckpt=False, pp=4)])
def test_a_combination_never_measured_together_is_priced_as_a_sum_of_parts(untried):
    space = _space()
    candidate = _candidate(**untried)
    truth = _true_peak(candidate.knobs) / GIB
    parted = MemoryModel(space, _priors(parted=True)).fit(_history())
    additive = MemoryModel(space, _priors(parted=False)).fit(_history())
    assert _predicted_gib(parted, space, candidate) == pytest.approx(truth, rel=0.15)
    assert abs(math.log(_predicted_gib(additive, space, candidate) / truth)) > 0.3


def test_the_activations_share_is_fitted_from_the_trials():
    """No trial of a part's knob: the model keeps the priors' share; one measured micro-batch fixes it."""
    space = _space()
    model = MemoryModel(space, _priors(parted=True)).fit(_history())
    effects = dict(zip(space.setting_keys, model.setting_effects()[0], strict=True))
    share = ACTIVATIONS / (STATE + ACTIVATIONS)
    assert effects["mb=8"] == pytest.approx(math.log1p(share * 7), abs=0.05)


def test_without_parts_the_model_is_the_additive_one():
    space = _space()
    whole = MemoryModel(space, _priors(parted=False)).fit(_history())
    effects = dict(zip(space.setting_keys, whole.setting_effects()[0], strict=True))
    candidate = _candidate(mb=4, pp=2)
    log_peak = whole.predict(space.encode_many([candidate]))[0][0]
    assert log_peak == pytest.approx(whole.intercept + effects["mb=4"] + effects["pp=2"], abs=1e-9)


def test_a_prior_keeps_its_part_through_records_and_a_bank_that_measured_the_whole():
    parted = Prior(key="mb=2", time_log_mean=0.0, time_log_sd=0.2, mem_log_mean=0.1, mem_log_sd=0.2, source="a",
                   mem_part="activations", mem_part_log_mean=math.log(2), mem_part_log_sd=0.05)
    assert Prior.from_dict(parted.to_dict()) == parted
    measured = Prior(key="mb=2", time_log_mean=-0.1, time_log_sd=0.05, mem_log_mean=0.2, mem_log_sd=0.05,
                     source="bank")
    for table in (PriorTable.of([parted]).merged(PriorTable.of([measured])),
                  PriorTable.of([parted]).combined(PriorTable.of([measured]))):
        assert table.get("mb=2").mem_part == "activations"
        assert table.get("mb=2").mem_part_log_mean == pytest.approx(math.log(2))
    with pytest.raises(ValueError, match="mem_part"):
        Prior(key="x=1", time_log_mean=0.0, time_log_sd=0.1, mem_log_mean=0.0, mem_log_sd=0.1, source="t",
              mem_part="weights", mem_part_log_mean=0.1, mem_part_log_sd=0.1)


def _levels_space() -> SearchSpace:
    knobs = [Knob(name="recompute", role="activation_checkpointing", type="str", default="full",
                  domain=["full", "selective", "none"], tunable=True),
             Knob(name="mb", role="micro_batch", type="int", default=1, domain=[1, 2], tunable=True)]
    return SearchSpace.from_contract(contract_with(knobs, global_batch=8, budget_bytes=200 * GIB), [])


def _level_priors(shared: float) -> PriorTable:
    """Selective +2 ± 1.0 and none +3 ± 0.8 on the activations against full, as a level table gives
    them: of their sds, ``shared`` is full's own level, which both are measured against."""
    rows = [("recompute=selective", 2.0, 1.0), ("recompute=none", 3.0, 0.8), ("mb=2", math.log(2), 0.05)]
    return PriorTable.of([
        Prior(key=key, time_log_mean=0.0, time_log_sd=0.2, mem_log_mean=0.0, mem_log_sd=0.5, source="test",
              mem_part="activations", mem_part_log_mean=own, mem_part_log_sd=sd,
              mem_part_shared_sd=shared if key.startswith("recompute") else 0.0)
        for key, own, sd in rows])


def test_a_measured_level_moves_the_levels_measured_against_the_same_reference():
    """Selective recomputation measured at e^3.5 its full-recomputation activations, 1.5 above its
    prior: where the two values share full's level, none (never tried) follows it up; independent,
    it stays at its prior and looks as cheap as selective."""
    space = _levels_space()
    state, activations = 40 * GIB, 2 * GIB
    history = [result(Candidate(knobs={"recompute": level, "mb": mb}), step=1.0,
                      peak=state + activations * mb * math.exp(own))
               for level, own, mb in (("full", 0.0, 1), ("full", 0.0, 2), ("selective", 3.5, 1))]
    none = Candidate(knobs={"recompute": "none", "mb": 1})
    shared = _predicted_gib(MemoryModel(space, _level_priors(shared=0.8)).fit(history), space, none)
    apart = _predicted_gib(MemoryModel(space, _level_priors(shared=0.0)).fit(history), space, none)
    selective = (state + activations * math.exp(3.5)) / GIB
    assert apart < selective * 1.1
    assert shared > selective * 1.3


def test_a_shared_sd_is_part_of_the_parts_sd():
    with pytest.raises(ValueError, match="mem_part_shared_sd"):
        Prior(key="x=1", time_log_mean=0.0, time_log_sd=0.1, mem_log_mean=0.0, mem_log_sd=0.1, source="t",
              mem_part="activations", mem_part_log_mean=0.1, mem_part_log_sd=0.1, mem_part_shared_sd=0.2)
