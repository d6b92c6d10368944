"""The probe holds a GPU job's CUDA allocator to the trial's budget (ENV_CUDA_BUDGET)."""

import json
import subprocess
import sys

import pytest

from infrarsi import probe

GIB = 2**30


def test_the_budget_is_a_share_of_the_device_at_most_all_of_it():
    assert probe.budget_fraction(16 * GIB, 64 * GIB) == 0.25
    assert probe.budget_fraction(200 * GIB, 140 * GIB) == 1.0
    with pytest.raises(ValueError):
        probe.budget_fraction(0, 140 * GIB)


def test_a_budget_on_a_machine_without_cuda_leaves_the_probe_working(tmp_path):
    out = tmp_path / "probe.jsonl"
    code = ("import torch; from infrarsi import probe; "
            "[probe.step(loss=1.0, tokens=8) for _ in range(3)]; print(torch.cuda.is_initialized())")
    env = {probe.ENV_FILE: str(out), probe.ENV_CUDA_BUDGET: str(GIB), "CUDA_VISIBLE_DEVICES": "",
           "PATH": "/usr/bin:/bin"}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False"  # the probe never initialised CUDA itself
    events = [json.loads(line)["event"] for line in out.read_text().splitlines()]
    assert events == ["step", "step", "step", "exit"]
