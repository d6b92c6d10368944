"""Settings written in code become knobs (infrarsi/knobs/literals.py): found by init with the role
their place gives them, written back by the rewrite, and moved by a real trial."""

from __future__ import annotations

import shutil
import textwrap
from pathlib import Path

import libcst as cst
import pytest

from infrarsi.contract import load_contract
from infrarsi.knobs.literals import literal_settings
from infrarsi.knobs.rewrite import set_defaults
from infrarsi.knobs.source import ParsedFile
from infrarsi.runner.trial import TrialSpec, run_trial
from infrarsi.stages.init import init
from infrarsi.trials import Candidate, TrialStatus
from tests.stages.conftest import git_repo, measured_copy

LITERALS = Path(__file__).parents[1] / "test_data" / "stages" / "literals"


def _settings(source: str, *, has_cuda: bool) -> dict[str, tuple[str, object]]:
    parsed = ParsedFile("train.py", cst.MetadataWrapper(cst.parse_module(textwrap.dedent(source))))
    return {s.knob.name: (s.rule.role, s.knob.default) for s in literal_settings([parsed], has_cuda=has_cuda)}


def test_init_reads_the_threads_and_the_loaders_workers_written_in_code(tmp_path):
    repo = Path(shutil.copytree(LITERALS, tmp_path / "job"))
    git_repo(repo)
    result = init(repo, budget_bytes=2**30)
    assert result.ok, result.message
    knobs = {k.name: k for k in result.contract.knobs}
    workers, threads = knobs["DataLoader.num_workers"], knobs["torch.set_num_threads"]
    assert (workers.role, workers.default, workers.flag, workers.tunable) == ("dataloader_workers", 0, "", True)
    assert workers.source == "train.py:19" and 2 in workers.domain
    assert (threads.role, threads.default, threads.flag) == ("threads", 2, "") and 1 in threads.domain
    # The script's thread count is a knob: the launcher does not add its own.
    assert "launcher_threads" not in knobs


def test_settings_for_a_cuda_machine_and_literals_that_disagree():
    source = """
        import torch
        torch.backends.cudnn.benchmark = True
        a = torch.utils.data.DataLoader(ds, num_workers=4, pin_memory=True)
        b = torch.utils.data.DataLoader(ds, num_workers=2, pin_memory=True, persistent_workers=w)
    """
    assert _settings(source, has_cuda=True) == {
        "torch.backends.cudnn.benchmark": ("cudnn_benchmark", True),
        "DataLoader.pin_memory": ("dataloader_pin_memory", True),
    }
    assert _settings(source, has_cuda=False) == {}


def test_the_rewrite_sets_every_loader_but_one_that_passes_an_expression():
    source = textwrap.dedent("""
        torch.set_num_threads(4)
        a = DataLoader(ds, **kwargs)
        b = DataLoader(ds, num_workers=0)
        c = DataLoader(ds, num_workers=args.workers)
    """)
    out = set_defaults(source, {"DataLoader.num_workers": 2, "torch.set_num_threads": 1})
    assert out == textwrap.dedent("""
        torch.set_num_threads(1)
        a = DataLoader(ds, **{**kwargs, 'num_workers': 2})
        b = DataLoader(ds, num_workers=2)
        c = DataLoader(ds, num_workers=args.workers)
    """)


@pytest.mark.e2e
def test_a_trial_runs_the_settings_it_wrote_with_the_loss_held(tmp_path):
    repo = measured_copy(LITERALS, tmp_path / "job", budget_bytes=2**30)  # each loader worker is a process
    contract = load_contract(repo)
    candidate = Candidate(knobs={"DataLoader.num_workers": 2, "torch.set_num_threads": 1})
    result = run_trial(TrialSpec(repo=repo, contract=contract, candidate=candidate))
    assert result.status is TrialStatus.OK, result.detail
    log = Path(result.log_path).read_text()
    assert "threads 1 workers 2" in log and "threads 2" not in log
    assert (repo / "train.py").read_text() == (LITERALS / "train.py").read_text()  # the user's file untouched
