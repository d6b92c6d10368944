"""Channels-last (infrarsi/patches/channels_last.py) on a real convolutional job: found where the
job builds the model it trains, tried on this machine, and its trial keeps the loss within the
numerics tolerance."""

import pytest

from infrarsi.contract import load_contract
from infrarsi.patches import applicable
from infrarsi.patches.numerics import numerics_by_design
from infrarsi.project import editable_sources
from infrarsi.runner.trial import TrialSpec, run_trial
from infrarsi.trials import Candidate, TrialStatus

pytestmark = pytest.mark.e2e


def test_a_convolutional_job_runs_channels_last_with_its_loss_held(vision_job):
    contract = load_contract(vision_job)
    tried, refused = applicable(editable_sources(vision_job, contract), contract, "cpu")
    assert "channels_last" in tried and "channels_last" not in refused
    candidate = Candidate(knobs={}, patches=("channels_last",))
    assert numerics_by_design(candidate)
    result = run_trial(TrialSpec(repo=vision_job, contract=contract, candidate=candidate,
                                 numerics_by_design=True))
    assert result.status is TrialStatus.OK, result.detail
    [hunk] = result.hunks
    assert "model = model.to(memory_format=torch.channels_last)" in hunk.text
