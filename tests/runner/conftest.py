"""Small repositories for the runner tests: one script from tests/test_data/runner/ as train.py,
a locked helper module, and a contract built directly (init is not needed to run a trial)."""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from infrarsi.contract import Contract, Knob, LossInvariant, MemoryBudget, Scope, Workload, file_sha256

DATA = Path(__file__).parents[1] / "test_data" / "runner"
ROOT = Path(__file__).parents[2]
GIB = 2**30
TOKENS = 4 * 8  # batch_size * block_size in every test script
REFERENCE = [4.0 * 0.9**i for i in range(4)]


def knobs() -> list[Knob]:
    return [
        Knob(name="max_iters", role="steps", type="int", default=10, flag="--max_iters"),
        Knob(name="batch_size", role="workload", type="int", default=4, flag="--batch_size"),
        Knob(name="step_s", role="unknown", type="float", default=0.02, flag="--step_s"),
        Knob(name="loss_shift", role="unknown", type="float", default=0.0, flag="--loss_shift"),
        Knob(name="alloc_mb", role="unknown", type="int", default=0, flag="--alloc_mb"),
        Knob(name="in_child", role="unknown", type="bool", default=False, flag="--in_child", flag_style="store_true"),
        Knob(name="nan_at", role="unknown", type="int", default=-1, flag="--nan_at"),
    ]


def make_contract(repo: Path, *, budget_bytes: int = 4 * GIB, knob_list: list[Knob] | None = None) -> Contract:
    return Contract(
        workload=Workload(
            entry="train.py",
            command=["python", "train.py"],
            tokens_per_step=TOKENS,
            seq_len=8,
            global_batch=4,
            seed=0,
            warmup_steps=2,
            measured_steps=4,
            planned_steps=1000,
        ),
        # Log lines print losses to 4 decimals, hence a tolerance above 1e-4.
        loss=LossInvariant(compare_steps=4, tolerance=1e-3, numerics_tolerance=0.05, reference=list(REFERENCE)),
        memory=MemoryBudget(budget_bytes=budget_bytes),
        scope=Scope(editable=["train.py"], locked={"helpers.py": file_sha256(repo / "helpers.py")}),
        knobs=knob_list if knob_list is not None else knobs(),
    )


@pytest.fixture
def make_repo(tmp_path):
    """make_repo(script) -> (repo, contract): the script as repo/train.py."""

    def make(script: str, **contract_args) -> tuple[Path, Contract]:
        repo = tmp_path / "repo"
        repo.mkdir()
        shutil.copy(DATA / script, repo / "train.py")
        (repo / "helpers.py").write_text("SCALE = 1.0\n")
        (repo / "data").mkdir()
        (repo / "data" / "tokens.bin").write_bytes(bytes(range(256)) * 16)
        return repo, make_contract(repo, **contract_args)

    return make


def reader_lag(result, step: int) -> float:
    """How late InfraRSI read step ``step``'s record (its arrival minus the job's stamp), from the
    trial's records.jsonl. Measured steps are timed from the arrival of the step before them, so
    their sum may read short of the job's real time by this much, never more."""
    for line in open(result.probe_path):
        record = json.loads(line)
        if record["kind"] == "step" and record["step"] == step:
            return record["arrived"] - record["t"]
    raise AssertionError(f"no record of step {step} in {result.probe_path}")


def tree_digest(root: Path) -> str:
    """sha256 over every path and byte under ``root`` except InfraRSI's own state directory."""
    digest = hashlib.sha256()
    for path in sorted(p for p in root.rglob("*") if ".infrarsi" not in p.relative_to(root).parts):
        digest.update(path.relative_to(root).as_posix().encode())
        if path.is_file():
            digest.update(path.read_bytes())
    return digest.hexdigest()


def alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def trial_processes(log: str) -> list[psutil.Process]:
    """The live processes of the trial whose output is ``log`` (its scripts print the token each of
    its processes inherits: pids printed inside the sandbox belong to its pid namespace)."""
    tokens = set(re.findall(r"token (\w+)", log))
    assert tokens and "None" not in tokens, f"no trial token in the log: {log!r}"
    found = []
    for proc in psutil.process_iter():
        try:
            if proc.environ().get("INFRARSI_TRIAL_TOKEN") in tokens and alive(proc.pid):
                found.append(proc)
        except psutil.Error:
            continue
    return found


TORCH_JOB = """
import torch
model = torch.nn.Embedding(256, 4)
optimizer = torch.optim.SGD(model.parameters(), lr=0.0)
model(torch.zeros(4, 8, dtype=torch.long)).sum().backward()
optimizer.step()
print(int(open("/proc/self/status").read().split("VmHWM:")[1].split()[0]) * 1024)
"""


@pytest.fixture(scope="session")
def torch_rss() -> int:
    """Peak RSS of a process that imported torch and took one optimizer step: what every test job
    holds before its own allocations (memory budgets in the tests are this plus their margin)."""
    out = subprocess.run([sys.executable, "-c", TORCH_JOB], capture_output=True, text=True, check=True, timeout=120)
    return int(out.stdout.split()[-1])


def _multiprocessing_helper(proc: psutil.Process) -> bool:
    """multiprocessing's forkserver and resource tracker (and what the forkserver forked), started in
    this test process by another package's tests (the language server's analysis pool): not a trial's."""
    try:
        command = " ".join(proc.cmdline())
    except psutil.Error:
        return False
    return "multiprocessing.forkserver" in command or "multiprocessing.resource_tracker" in command


@pytest.fixture(autouse=True)
def nothing_left_behind():
    """Every runner test must leave no process of its own running."""
    yield
    # A process orphaned by a killed InfraRSI is reparented to this one (a subreaper, once a test made
    # it one) and may still be exiting: give it a moment, and reap it.
    children = [p for p in psutil.Process().children(recursive=True) if not _multiprocessing_helper(p)]
    _, survivors = psutil.wait_procs(children, timeout=5)
    survivors = [p for p in survivors if alive(p.pid)]
    assert not survivors, f"processes left behind: {[(p.pid, p.cmdline()) for p in survivors]}"
