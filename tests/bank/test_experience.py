"""What a run leaves in the experience bank: effects it measured, nothing it did not."""

from types import SimpleNamespace

import numpy as np

from infrarsi.bank.experience import Experience
from infrarsi.hardware import fingerprint
from infrarsi.priors.types import PriorTable
from infrarsi.search.space import SearchSpace
from infrarsi.search.synthetic import DENSE_TIME, Surface, contract_with, dense_knobs


def test_only_settings_some_trial_held_are_recorded(tmp_path):
    contract = contract_with(dense_knobs())
    space = SearchSpace.from_contract(contract, [])
    experience = Experience.open(f"sqlite:///{tmp_path}/bank.db", contract, {"params": 1_000_000}, fingerprint())
    surface = Surface(space, DENSE_TIME, {}, base_peak=0.1 * space.budget_bytes, seed=0)
    base = space.baseline()
    # Micro-batch and threads vary; compile never runs.
    cands = [base] + [space.with_value(base, k, v) for k, v in
                      (("micro_batch_size", 8), ("micro_batch_size", 16), ("threads", 1), ("micro_batch_size", 8))]
    history = [surface.run(c) for c in cands]
    experience.record(SimpleNamespace(patch_checks=[], promoted=None), history, contract=contract, space=space,
                      priors=PriorTable(), noise_cv=0.0)
    learned = experience.advice(contract).priors
    assert "micro_batch_size=8" in learned and "threads=1" in learned
    assert "compile=True" not in learned and "dtype=bfloat16" not in learned
    assert np.isclose(learned.get("threads=1").time_log_mean, DENSE_TIME["threads=1"], atol=0.2)
