"""What a run leaves in the experience bank: effects it measured, nothing it did not."""

from types import SimpleNamespace

import numpy as np

from infrarsi.bank import ExperienceBank, WorkloadSignature
from infrarsi.hardware import fingerprint
from infrarsi.priors.types import PriorTable
from infrarsi.search.space import SearchSpace
from infrarsi.search.strategy import Strategy
from infrarsi.search.synthetic import DENSE_TIME, Surface, contract_with, dense_knobs


def test_only_settings_some_trial_held_are_recorded(tmp_path):
    contract = contract_with(dense_knobs())
    space = SearchSpace.from_contract(contract, [])
    strategy = Strategy(name="infrarsi", contract=contract, priors=PriorTable(), priors_source="test")
    strategy.prepare(space)
    strategy.bank = ExperienceBank(f"sqlite:///{tmp_path}/bank.db")
    strategy.signature = WorkloadSignature.from_contract(contract, {"params": 1_000_000})
    strategy.hardware = fingerprint()
    surface = Surface(space, DENSE_TIME, {}, base_peak=0.1 * space.budget_bytes, seed=0)
    base = space.baseline()
    # Micro-batch and threads vary; compile never runs.
    cands = [base] + [space.with_value(base, k, v) for k, v in
                      (("micro_batch_size", 8), ("micro_batch_size", 16), ("threads", 1), ("micro_batch_size", 8))]
    history = [surface.run(c) for c in cands]
    strategy.record_findings(SimpleNamespace(patch_checks=[], promoted=None), history)
    learned = strategy.bank.priors_for(strategy.signature, strategy.hardware.id)
    assert "micro_batch_size=8" in learned and "threads=1" in learned
    assert "compile=True" not in learned and "dtype=bfloat16" not in learned
    assert np.isclose(learned.get("threads=1").time_log_mean, DENSE_TIME["threads=1"], atol=0.2)
