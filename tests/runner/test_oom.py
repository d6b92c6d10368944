"""The memory budget covers the whole process tree and is enforced by a kill."""

import shutil

import pytest

from infrarsi.contract import Contract, Knob, LossInvariant, MemoryBudget, Scope, Workload, file_sha256
from infrarsi.runner.trial import TrialSpec, run_trial
from infrarsi.trials import Candidate, TrialStatus

from .conftest import ROOT, tree_digest

pytestmark = pytest.mark.e2e
MB = 2**20


def run(repo, contract, knobs, **spec_args):
    before = tree_digest(repo)
    result = run_trial(TrialSpec(repo=repo, contract=contract, candidate=Candidate(knobs=knobs), **spec_args))
    assert tree_digest(repo) == before
    return result


@pytest.mark.parametrize("in_child", [False, True], ids=["in-process", "in-a-child"])
def test_over_budget_is_killed_as_oom_with_the_level_seen(make_repo, torch_rss, in_child):
    budget = torch_rss + 300 * MB
    repo, contract = make_repo("allocates.py", budget_bytes=budget)
    # 100 MB a step in the script, or 500 MB at once in a child process.
    result = run(repo, contract, {"alloc_mb": 50 if in_child else 100, "in_child": in_child}, steps=10)
    assert result.status is TrialStatus.OOM, result.detail
    level = int(result.detail.split("(")[1].split(" bytes")[0])
    assert level > budget and result.peak_bytes >= level
    assert f"above the budget of {budget / 2**30:.2f} GiB" in result.detail
    assert len(result.losses) < 10


def test_the_same_job_under_budget_is_ok(make_repo, torch_rss):
    budget = torch_rss + 300 * MB
    repo, contract = make_repo("allocates.py", budget_bytes=budget)
    result = run(repo, contract, {"alloc_mb": 20}, steps=6)
    assert result.status is TrialStatus.OK, result.detail
    assert torch_rss + 100 * MB < result.peak_bytes < budget


def dense_gpt_contract(repo, budget_bytes):
    locked = {name: file_sha256(repo / name) for name in ("data.py", "model.py")}
    return Contract(
        workload=Workload(entry="train.py", command=["python", "train.py"], tokens_per_step=16 * 256,
                          args={"batch_size": 16, "block_size": 256, "n_layer": 2, "n_embd": 64, "vocab_size": 256},
                          seq_len=256, global_batch=16, seed=1337, warmup_steps=0, measured_steps=1,
                          planned_steps=200),
        loss=LossInvariant(compare_steps=1, tolerance=1e-5, numerics_tolerance=1e-3),
        memory=MemoryBudget(budget_bytes=budget_bytes),
        scope=Scope(editable=["train.py"], locked=locked),
        knobs=[
            Knob(name="max_iters", role="steps", type="int", default=200, flag="--max_iters"),
            Knob(name="micro_batch_size", role="micro_batch", type="int", default=4, flag="--micro_batch_size",
                 domain=[1, 2, 4, 8, 16], tunable=True),
        ],
    )


def test_a_large_micro_batch_exceeds_a_budget_a_small_one_fits(tmp_path):
    """fixtures/dense_gpt (2 layers, d 64, batch 16, T 256) peaks near 510 MB at micro-batch 16
    and 360 MB at 1 (measured with /usr/bin/time)."""
    repo = tmp_path / "dense_gpt"
    shutil.copytree(ROOT / "fixtures" / "dense_gpt", repo, ignore=shutil.ignore_patterns("__pycache__"))
    contract = dense_gpt_contract(repo, budget_bytes=440 * MB)
    large = run(repo, contract, {"micro_batch_size": 16}, timeout_s=240)
    assert large.status is TrialStatus.OOM, large.detail
    assert large.losses == []
    small = run(repo, contract, {"micro_batch_size": 1}, timeout_s=240)
    assert small.status is TrialStatus.OK, small.detail
    assert small.peak_bytes < 440 * MB and small.tokens_per_step == 16 * 256


def cuda_error_repo(make_repo, launcher: str):
    """tests/test_data/runner/cuda_error.py, run as a plain script or by torchrun as two ranks."""
    repo, contract = make_repo("cuda_error.py")
    contract.knobs.append(Knob(name="error", role="unknown", type="str", default="oom", flag="--error"))
    if launcher == "torchrun":
        contract.workload.launcher = "torchrun"
        contract.workload.command = ["torchrun", "--nproc_per_node=2", "train.py"]
        contract.workload.tokens_per_step *= 2  # tokens per step count every rank's
    return repo, contract


@pytest.mark.parametrize("launcher", ["python", "torchrun"])
def test_a_cuda_out_of_memory_error_is_an_oom_however_much_follows_it(make_repo, launcher):
    # torchrun prints ~40 lines of its own after the failing rank's traceback.
    repo, contract = cuda_error_repo(make_repo, launcher)
    result = run(repo, contract, {}, timeout_s=120)
    assert result.status is TrialStatus.OOM, result.detail
    first = result.detail.splitlines()[0]
    assert first.startswith("ran out of memory (exit code 1): torch.OutOfMemoryError: CUDA out of memory."), first


def test_cublas_failing_to_allocate_is_an_oom_running_out_of_shared_memory_is_not(make_repo):
    repo, contract = cuda_error_repo(make_repo, "python")
    cublas = run(repo, contract, {"error": "cublas"}, timeout_s=120)
    assert cublas.status is TrialStatus.OOM, cublas.detail
    shared = run(repo, contract, {"error": "shared_memory"}, timeout_s=120)
    assert shared.status is TrialStatus.CRASH, shared.detail
    assert "out of resource: shared memory" in shared.detail


def test_a_gpu_job_killed_before_its_exit_record_has_no_peak_rather_than_the_host_s(make_repo):
    repo, contract = make_repo("hangs.py")
    contract.memory.device = "cuda"
    result = run(repo, contract, {}, timeout_s=5)
    assert result.status is TrialStatus.TIMEOUT, result.detail
    assert result.peak_bytes is None
