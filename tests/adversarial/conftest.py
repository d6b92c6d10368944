"""The job the adversarial proposals attack, prepared once per session: fixtures/dense_gpt with
tests/test_data/adversarial/model.py (attention one head at a time, so batching the heads is an
honest speed-up), in a git repo, after the real ``init`` and ``doctor``. The contract is narrowed to
a small model, one warm-up and four measured steps, a 60-step job (it bounds re-verification's long
runs: 60 steps of about 40 ms here; 200 made these tests a quarter of the suite's time), and no
tunable knob: the only candidates are the proposals, so every trial of a run is one of theirs (or
the baseline's).

Helpers are imported by the tests as ``from tests.adversarial.conftest import …``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import git
import pytest

from infrarsi.contract import load_contract, save_contract
from infrarsi.stages.doctor import doctor
from infrarsi.stages.init import init

ROOT = Path(__file__).parents[2]
FIXTURE = ROOT / "fixtures" / "dense_gpt"
DATA = ROOT / "tests" / "test_data" / "adversarial"
INFRARSI = Path(sys.executable).parent / "infrarsi"
USER = git.Actor("Ada Engineer", "ada@example.com")
# Small enough that a step takes tens of milliseconds; sixteen heads so that the loop over them
# costs what batching them saves.
SMALL = {"n_layer": 2, "n_head": 16, "n_embd": 64, "vocab_size": 256, "block_size": 64, "batch_size": 8}


def _narrow(repo: Path) -> None:
    contract = load_contract(repo)
    w = contract.workload
    workload = replace(w, args={**w.args, **SMALL, "threads": 1}, tokens_per_step=8 * 64, seq_len=64,
                       global_batch=8, warmup_steps=1, measured_steps=4, planned_steps=60)
    knobs = [replace(k, tunable=False, default=SMALL.get(k.name, 1 if k.name == "threads" else k.default))
             for k in contract.knobs]
    save_contract(replace(contract, workload=workload, knobs=knobs,
                          loss=replace(contract.loss, compare_steps=5)), repo)


@pytest.fixture(scope="session")
def prepared_job(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The job after init, the narrowed contract and ``doctor --repeats 2`` (read-only: copy it)."""
    repo = tmp_path_factory.mktemp("adversarial") / "job"
    shutil.copytree(FIXTURE, repo, ignore=shutil.ignore_patterns("__pycache__", ".infrarsi"))
    shutil.copy(DATA / "model.py", repo / "model.py")
    g = git.Repo.init(repo)
    g.index.add([p.name for p in repo.iterdir() if p.is_file()])
    g.index.commit("the user's training job", author=USER, committer=USER)
    with pytest.MonkeyPatch.context() as mp:
        mp.delenv("ANTHROPIC_API_KEY", raising=False)
        done = init(repo)
        assert done.ok, done.message
        _narrow(repo)
        assert doctor(repo, repeats=2).ok
    return repo


@pytest.fixture
def job(prepared_job: Path, tmp_path: Path) -> Path:
    """This test's own copy of the prepared job."""
    return Path(shutil.copytree(prepared_job, tmp_path / "job", symlinks=True))


def infrarsi_run(repo: Path, server_url: str, model: str, trials: int, home: Path) -> dict:
    """``infrarsi run --trials N --json`` as a user runs it, its model the loopback server's."""
    env = {**os.environ, "HOME": str(home), "ANTHROPIC_API_KEY": "sk-test", "ANTHROPIC_BASE_URL": server_url,
           "INFRARSI_ANTHROPIC_MODEL": model, "INFRARSI_LLM_MAX_RETRIES": "0"}
    done = subprocess.run([str(INFRARSI), "run", str(repo), "--trials", str(trials), "--no-bank", "--json"],
                          env=env, capture_output=True, text=True, timeout=1800)
    assert done.returncode in (0, 1) and done.stdout.strip(), done.stderr[-3000:]
    return json.loads(done.stdout)
