"""FSDP's sharded parameters are checksummed whole: every rank writes its own shard.

The ddp_gpt fixture under torchrun (gloo on CPU) trains the same model with DDP (every rank a
replica) and with ``--fsdp`` (FSDP2: every parameter a DTensor sharded over the two ranks). Both
runs' parameter checksums must exist and agree, as a candidate that switches the one to the other
is compared with a DDP baseline.
"""

from __future__ import annotations

import pytest

from infrarsi.contract import load_contract
from infrarsi.runner.trial import TrialSpec, run_trial
from infrarsi.trials import Candidate, TrialStatus

from .conftest import ROOT, cli, git_repo

pytestmark = pytest.mark.e2e


@pytest.mark.timeout(300)
def test_fsdp_shards_sum_to_the_ddp_checksum(tmp_path):
    repo = git_repo(tmp_path / "ddp", ROOT / "fixtures" / "ddp_gpt")
    cli("init", str(repo), "--warmup-steps", "1", "--measured-steps", "2", "--budget-gib", "6")
    contract = load_contract(repo)
    assert contract.workload.launcher == "torchrun" and contract.knob("fsdp").default is False
    checksums = {}
    for fsdp in (False, True):
        result = run_trial(TrialSpec(repo=repo, contract=contract, candidate=Candidate(knobs={"fsdp": fsdp})))
        assert result.status is TrialStatus.OK, result.detail
        checksums[fsdp] = result.param_checksum
    assert checksums[False] is not None and checksums[True] is not None, checksums
    # One replica's sum against the sum of both ranks' shards: each element counted once.
    assert checksums[True] == pytest.approx(checksums[False], rel=1e-5), checksums
