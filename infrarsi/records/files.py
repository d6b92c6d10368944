"""Where each stage's record lives under a repo: the state file names, defined once.

Everything InfraRSI keeps in a training repo is under ``.infrarsi/`` (``contract.STATE_DIR``);
docs/INTERFACES.md lists the files and which stage writes each.
"""

from __future__ import annotations

from pathlib import Path

from infrarsi.contract import CONTRACT_FILE, STATE_DIR

DOCTOR_FILE = "doctor.json"
RUN_FILE = "run.json"
STUDY_FILE = "study.db"
"""The Optuna study's default SQLite storage."""


def state_dir(repo: Path) -> Path:
    return Path(repo) / STATE_DIR


def doctor_path(repo: Path) -> Path:
    return state_dir(repo) / DOCTOR_FILE


def run_path(repo: Path) -> Path:
    return state_dir(repo) / RUN_FILE


def study_path(repo: Path) -> Path:
    return state_dir(repo) / STUDY_FILE


def record_paths(repo: Path) -> tuple[Path, Path, Path]:
    """The contract, doctor's record and the run's record: what a reader reloads when one changes."""
    return state_dir(repo) / CONTRACT_FILE, doctor_path(repo), run_path(repo)
