"""What a run leaves in the experience bank: effects it measured, nothing it did not."""

from types import SimpleNamespace

import numpy as np
import pytest

from infrarsi.bank.experience import Experience
from infrarsi.hardware import fingerprint
from infrarsi.priors.types import Prior, PriorTable
from infrarsi.search.space import SearchSpace
from infrarsi.search.synthetic import DENSE_TIME, Surface, contract_with, dense_knobs


def _recorded(tmp_path, changes, own: PriorTable):
    """A bank holding one run's trials: the baseline and each (knob, value) of ``changes`` on the
    synthetic dense surface, recorded with ``own`` as the run's own priors."""
    contract = contract_with(dense_knobs())
    space = SearchSpace.from_contract(contract, [])
    experience = Experience.open(f"sqlite:///{tmp_path}/bank.db", contract, {"params": 1_000_000}, fingerprint())
    surface = Surface(space, DENSE_TIME, {}, base_peak=0.1 * space.budget_bytes, seed=0)
    base = space.baseline()
    history = [surface.run(c) for c in [base] + [space.with_value(base, k, v) for k, v in changes]]
    experience.record(SimpleNamespace(patch_checks=[], promoted=None), history, contract=contract, space=space,
                      priors=own, own=own, noise_cv=0.0)
    return experience, contract


def test_only_settings_some_trial_held_are_recorded(tmp_path):
    # Micro-batch and threads vary; compile never runs.
    experience, contract = _recorded(tmp_path, [("micro_batch_size", 8), ("micro_batch_size", 16), ("threads", 1),
                                                ("micro_batch_size", 8)], PriorTable())
    learned = experience.advice(contract).priors
    assert "micro_batch_size=8" in learned and "threads=1" in learned
    assert "compile=True" not in learned and "dtype=bfloat16" not in learned
    assert np.isclose(learned.get("threads=1").time_log_mean, DENSE_TIME["threads=1"], atol=0.2)


def test_a_finding_keeps_what_its_run_s_own_priors_expected_and_is_read_against_another_s(tmp_path):
    """Recorded with the run's own prior for micro-batch 8 (-0.1), the finding moves with the reading
    run's own prior (-0.5: 0.4 lower); threads=1, which the own priors did not price, does not move."""
    def table(mean):
        return PriorTable.of([Prior(key="micro_batch_size=8", time_log_mean=mean, time_log_sd=0.1,
                                    mem_log_mean=0.0, mem_log_sd=0.2, source="builtin")])

    experience, contract = _recorded(tmp_path, [("micro_batch_size", 8), ("threads", 1), ("micro_batch_size", 8)],
                                     table(-0.1))
    raw, rebased = experience.advice(contract).priors, experience.advice(contract, table(-0.5)).priors
    assert rebased.get("micro_batch_size=8").time_log_mean == \
        pytest.approx(raw.get("micro_batch_size=8").time_log_mean - 0.4)
    assert rebased.get("threads=1").time_log_mean == pytest.approx(raw.get("threads=1").time_log_mean)
