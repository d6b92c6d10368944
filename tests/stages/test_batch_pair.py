"""A script's micro-batch and accumulation count are one tunable dimension that holds the global
batch, whatever their names and however they are declared (issue 52): nanoGPT's globals with a
config file and ``--key=value`` (tests/test_data/init/nanogpt_repo, whose printed tokens per
iteration, MFU estimate and checkpoint under the best validation loss must not lock the
micro-batch), argparse flags, dataclass fields and a nested config node
(tests/test_data/stages/pair). Each: real init, doctor, and a trial that moves the pair, keeps
the tokens and samples per step and passes the loss check."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

from infrarsi.contract import load_contract
from infrarsi.knobs.pair import describe
from infrarsi.runner.trial import TrialSpec, run_trial
from infrarsi.search.space import SearchSpace
from infrarsi.stages.doctor import doctor
from infrarsi.stages.init import init
from infrarsi.trials import Candidate, TrialStatus
from tests.stages.conftest import git_repo

DATA = Path(__file__).parents[1] / "test_data"
NANOGPT = DATA / "init" / "nanogpt_repo"
PAIR = DATA / "stages" / "pair"

# style: (folder, command, micro-batch knob, accumulation knob, what the moved run prints)
STYLES = {
    "globals": (NANOGPT, ["train.py", "config/train_tiny.py"], "batch_size", "gradient_accumulation_steps",
                "Overriding: batch_size = 8"),
    "argparse": (PAIR / "argparse", ["train.py"], "rows_per_pass", "passes_per_update",
                 "2 passes of 8 sequences per update"),
    "dataclass": (PAIR / "dataclass", ["train.py"], "micro_batch_size", "grad_accum",
                  "2 micro-batches of 8 sequences per step"),
    "nested": (PAIR / "nested", ["train.py"], "trainer.batch_size", "trainer.accumulate",
               "2 passes of 8 sequences per step"),
}


def _job(style: str, dest: Path) -> Path:
    folder = STYLES[style][0]
    repo = Path(shutil.copytree(folder, dest / style, ignore=shutil.ignore_patterns("__pycache__", ".infrarsi")))
    for name in ("model.py", "data.py"):
        if not (repo / name).exists():
            shutil.copy(NANOGPT / name, repo / name)
    git_repo(repo)
    return repo


def _init(style: str, dest: Path):
    repo = _job(style, dest)
    result = init(repo, command=[sys.executable, *STYLES[style][1]], budget_bytes=2**30)
    assert result.ok, result.message
    return repo, result


@pytest.mark.parametrize("style", list(STYLES))
def test_init_pairs_the_micro_batch_and_its_accumulation(style, tmp_path):
    _, result = _init(style, tmp_path)
    _, _, micro, accum, _ = STYLES[style]
    contract = result.contract
    assert (contract.knob(micro).role, contract.knob(accum).role) == ("micro_batch", "grad_accum")
    assert contract.knob(micro).domain == contract.knob(accum).domain == [1, 2, 4, 8, 16]
    assert (contract.workload.global_batch, contract.workload.tokens_per_step or 512) == (16, 512)
    space = SearchSpace.from_contract(contract, [])
    assert {k.name for k in space.coupled.values()} == {micro, accum} and space.derived == accum
    pair = result.pair
    assert pair is not None and (pair.micro, pair.accum, pair.global_batch) == (micro, accum, 16)
    assert pair.splits == [(1, 16), (2, 8), (4, 4), (8, 2), (16, 1)]
    assert any(line.startswith(f"{micro}: the data's leading dimension at ") and "randint" in line
               for line in pair.evidence)
    assert any(line.startswith(f"{accum}: the accumulation count at ") and "range(" in line for line in pair.evidence)
    assert describe(pair, 32)[0].startswith(f"one dimension: {micro} x {accum} = 16 sequences a step (512 tokens)")


def test_nanogpts_logging_and_checkpoints_lock_neither(tmp_path):
    """The printed tokens per iteration, the MFU estimate (batch_size * gradient_accumulation_steps)
    and the checkpoint saved under the best validation loss only log or store: the pair stays tunable,
    and the script's own division by the process count is found."""
    _, result = _init("globals", tmp_path)
    pair = result.pair
    logged = " ".join(pair.logged)
    assert "tokens_per_iter" in logged and "mfu" in logged
    assert pair.over_ranks and result.contract.knob("gradient_accumulation_steps").over_ranks is True
    assert any("divided by the process count at train.py:" in line and "//= ddp_world_size" in line
               for line in pair.evidence)
    assert result.contract.knob("block_size").role == "workload"


def test_under_torchrun_a_count_the_script_divides_by_its_processes_holds_the_global_batch(tmp_path):
    """nanoGPT's count covers every rank: micro x accumulation is the global batch whatever the
    process count, and the search's splits keep it for each count it tries."""
    repo = _job("globals", tmp_path)
    result = init(repo, command=["torchrun", "--standalone", "--nproc_per_node=2", "train.py", "config/train_tiny.py"],
                  budget_bytes=2**30)
    assert result.ok, result.message
    contract = result.contract
    assert contract.workload.global_batch == 16 and contract.knob("nproc_per_node").domain == [1, 2]
    space = SearchSpace.from_contract(contract, [])
    combos = {(c["batch_size"], c["gradient_accumulation_steps"], c["nproc_per_node"]) for c in space._group}
    assert (4, 4, 2) in combos and (8, 2, 2) in combos and (8, 2, 1) in combos
    assert (4, 2, 2) not in combos  # 4 x (2 // 2) x 2 = 8: half the global batch
    assert (16, 1, 2) not in combos  # one micro-step cannot be shared by two ranks


@pytest.mark.e2e
@pytest.mark.parametrize("style", list(STYLES))
def test_a_trial_moves_the_pair_and_keeps_the_global_batch(style, tmp_path):
    repo, _ = _init(style, tmp_path)
    assert doctor(repo, repeats=2).ok
    contract = load_contract(repo)
    _, _, micro, accum, printed = STYLES[style]
    space = SearchSpace.from_contract(contract, [])
    moved = space.with_value(space.baseline(), micro, 8)
    assert moved is not None and (moved.knobs[micro], moved.knobs[accum]) == (8, 2)  # the accumulation follows
    result = run_trial(TrialSpec(repo=repo, contract=contract, candidate=Candidate(knobs=moved.knobs),
                                 check_loss=True, log_dir=tmp_path / "moved"))
    assert result.status is TrialStatus.OK, result.detail
    assert (result.samples_per_step, result.tokens_per_step) == (16, 512)
    assert printed in Path(result.log_path).read_text()
