"""A job whose libraries look torch up before importing it (``importlib.util.find_spec("torch")``,
as ``datasets`` does) is still observed by the launcher: a real trial of a small script."""

from __future__ import annotations

import textwrap

import pytest

from infrarsi.runner.trial import TrialSpec, run_trial
from infrarsi.trials import Candidate, TrialStatus

from .conftest import make_contract

pytestmark = pytest.mark.e2e

LOOKS_FIRST = """
    import importlib.util
    import sys

    assert importlib.util.find_spec("torch") is not None and "torch" not in sys.modules
    import torch

    torch.manual_seed(0)
    w = torch.nn.Linear(4, 1)
    optimizer = torch.optim.SGD(w.parameters(), lr=0.1)
    x = torch.randn(8, 4)
    for _ in range(1000):
        loss = w(x).pow(2).mean()
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
"""


def test_a_job_that_looks_torch_up_before_importing_it_is_observed(tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "train.py").write_text(textwrap.dedent(LOOKS_FIRST))
    (repo / "helpers.py").write_text("")
    contract = make_contract(repo, knob_list=[])
    result = run_trial(TrialSpec(repo=repo, contract=contract, candidate=Candidate(), timeout_s=120,
                                 check_loss=False))
    assert result.status is TrialStatus.OK, result.detail
    assert len(result.step_times) == contract.workload.measured_steps
