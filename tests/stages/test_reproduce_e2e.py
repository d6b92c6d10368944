"""The reproduce command `optimize` prints for a promoted run, run by hand in a copy of the repo
(after `infrarsi apply` on its branch when the line says so): it runs the winner's step count,
its settings (the paced job's step time follows them by construction) and its loss trajectory."""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

import git
import optuna
import pytest

from infrarsi.cli import outcome
from infrarsi.contract import load_contract
from infrarsi.experiment.store import TrialStore, open_storage
from infrarsi.records import load_run
from infrarsi.runner.command import job_steps
from infrarsi.stages.apply import apply
from infrarsi.stages.optimize import OptimizeResult
from infrarsi.stages.report import report
from tests.stages.conftest import paced_step_s

pytestmark = pytest.mark.e2e


def printed_reproduction(repo: Path) -> tuple[str, str]:
    """The heading and the command of the Reproduce lines `optimize` prints for ``repo``'s run."""
    run = load_run(repo)
    result = OptimizeResult(status=run.status, message=run.message, run=run, report=report(repo, formats=()))
    lines = outcome.lines(result, 80, str(repo))
    at = next(i for i, line in enumerate(lines) if line.startswith("Reproduce"))
    end = next(i for i in range(at, len(lines)) if lines[i].endswith(":"))
    command = []
    for line in lines[end + 1:]:
        if not line.startswith("  "):
            break
        command.append(line.strip().removesuffix("\\").strip())
        if not line.endswith("\\"):
            break
    return " ".join(lines[at:end + 1]), " ".join(command)


def winner_losses(repo: Path) -> list[float]:
    """The longest loss trajectory a trial of the promoted candidate recorded in the study."""
    run, contract = load_run(repo), load_contract(repo)
    study = optuna.load_study(study_name=run.study_name, storage=open_storage(run.storage_url))
    key = run.promoted.candidate.key()
    mine = [s.result for s in TrialStore(study, contract, []).trials()
            if s.result.ok and s.result.candidate.key() == key]
    return max((r.losses for r in mine), key=len)


def test_the_printed_command_runs_the_winner(ran: Path, tmp_path: Path):
    run, contract = load_run(ran), load_contract(ran)
    assert run.promoted is not None, run.message
    heading, command = printed_reproduction(ran)
    assert command, heading
    if "infrarsi apply" in heading:  # settings or patches in the source: on the branch apply commits
        applied = apply(ran)
        assert applied.status == "committed", applied.message
        git.Repo(ran).git.checkout(applied.branch)
    copy = tmp_path / "by-hand"
    shutil.copytree(ran, copy, ignore=shutil.ignore_patterns(".infrarsi", ".git", "__pycache__"))
    probe_file = tmp_path / "steps.jsonl"
    env = {k: v for k, v in os.environ.items() if not k.startswith("INFRARSI_")}
    env |= {"PATH": f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}",
            "INFRARSI_PROBE_FILE": str(probe_file)}
    done = subprocess.run(["bash", "-c", command], check=False, cwd=copy, env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    steps = [r for r in map(json.loads, probe_file.read_text().splitlines()) if r["event"] == "step"]

    # The step count every trial of the run told the job, not the contract's short trial length.
    assert len(steps) == job_steps(contract)
    # The winner's settings: train.py's step time follows its knobs, and the baseline's is far slower.
    measured = statistics.median(r["dt"] for r in steps[1:])
    assert measured == pytest.approx(paced_step_s(run.promoted.candidate.knobs), rel=0.25)
    assert measured < 0.75 * paced_step_s(contract.defaults())
    # The loss trajectory the run measured for the winner.
    losses = winner_losses(ran)
    assert [r["loss"] for r in steps[:len(losses)]] == pytest.approx(losses, abs=contract.loss.tolerance)
