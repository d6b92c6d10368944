"""Speed settings the launcher applies (infrarsi/launcher/settings.py): the variables a trial and a
person's command get, and a real trial whose job sees the thread count it was given."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from infrarsi.contract import Knob
from infrarsi.launcher import SITE_DIR
from infrarsi.launcher.settings import launcher_knobs, settings_env
from infrarsi.report.model import reproduce_command
from infrarsi.runner.command import build_argv
from infrarsi.runner.trial import TrialSpec, run_trial
from infrarsi.trials import Candidate, TrialStatus

from .conftest import make_contract

SCRIPT = """
import torch
print(f"threads {torch.get_num_threads()}", flush=True)
torch.manual_seed(0)
model = torch.nn.Linear(8, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(100):
    loss = model(torch.ones(4, 8)).pow(2).mean()
    loss.backward()
    opt.step()
    opt.zero_grad()
"""


def _contract(tmp_path: Path, *, has_cuda: bool = False):
    repo = tmp_path / "repo"
    repo.mkdir(exist_ok=True)
    (repo / "train.py").write_text(textwrap.dedent(SCRIPT))
    (repo / "helpers.py").write_text("SCALE = 1.0\n")  # the runner tests' contract locks it
    knobs = launcher_knobs([], has_cuda=has_cuda, cpu_count=4, auto_threads=2, launcher="python")
    return repo, make_contract(repo, knob_list=knobs)


def test_cuda_settings_only_where_there_is_a_gpu(tmp_path):
    assert [k.name for k in launcher_knobs([], has_cuda=False, cpu_count=4, auto_threads=2, launcher="python")] \
        == ["launcher_threads"]
    on_gpu = launcher_knobs([], has_cuda=True, cpu_count=4, auto_threads=2, launcher="python")
    assert [k.name for k in on_gpu] == ["launcher_threads", "cudnn_benchmark", "tf32_matmul",
                                        "cuda_expandable_segments"]
    assert on_gpu[0].domain == [0, 1, 3, 4]  # 0: torch's default (2 here), which is not tried twice
    script_threads = Knob(name="threads", role="threads", type="int", default=0, flag="--threads")
    assert not launcher_knobs([script_threads], has_cuda=False, cpu_count=4, auto_threads=2, launcher="python")
    assert not launcher_knobs([], has_cuda=False, cpu_count=4, auto_threads=None, launcher="torchrun")


def test_variables_for_a_trial_and_for_a_person(tmp_path):
    _, contract = _contract(tmp_path, has_cuda=True)
    values = {"launcher_threads": 3, "cudnn_benchmark": True, "tf32_matmul": True, "cuda_expandable_segments": True}
    assert settings_env(contract, values) == {
        "OMP_NUM_THREADS": "3", "INFRARSI_NUM_THREADS": "3", "INFRARSI_CUDNN_BENCHMARK": "1",
        "TORCH_ALLOW_TF32_CUBLAS_OVERRIDE": "1", "INFRARSI_TF32": "1",
        "PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"}
    person = settings_env(contract, values, for_person=True)
    assert person["OMP_NUM_THREADS"] == "3" and "INFRARSI_NUM_THREADS" not in person
    assert person["PYTHONPATH"] == str(SITE_DIR)  # cuDNN benchmarking has no torch variable
    assert settings_env(contract, {"launcher_threads": 0, "cudnn_benchmark": False}) == {}  # defaults: nothing set
    assert build_argv(contract, values, python="PY") == ["PY", "train.py"]  # never flags
    command = reproduce_command(Candidate(knobs={"launcher_threads": 3}), contract)
    assert command == "OMP_NUM_THREADS=3 python train.py"


def test_a_persons_run_with_the_launcher_directory_gets_the_settings(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(SITE_DIR), "INFRARSI_NUM_THREADS": "1"}
    env.pop("INFRARSI_RECORDS", None)
    done = subprocess.run([sys.executable, "-c", "import torch; print(torch.get_num_threads())"], env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.stdout.strip() == "1", done.stderr


@pytest.mark.e2e
def test_a_trial_applies_the_thread_count(tmp_path):
    repo, contract = _contract(tmp_path)
    result = run_trial(TrialSpec(repo=repo, contract=contract, candidate=Candidate(knobs={"launcher_threads": 1}),
                                 timeout_s=120, check_loss=False))
    assert result.status is TrialStatus.OK, result.detail
    assert "threads 1" in Path(result.log_path).read_text()
    command = Path(result.log_path).with_name("command.txt").read_text()
    assert command.startswith("OMP_NUM_THREADS=1 INFRARSI_NUM_THREADS=1 ")
