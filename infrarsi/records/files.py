"""Where InfraRSI keeps things under a repo: every path in ``.infrarsi/``, defined once.

Everything InfraRSI keeps in a training repo is under ``.infrarsi/`` (``contract.STATE_DIR``,
defined beside the contract because this module imports it); docs/INTERFACES.md lists the files
and which stage writes each.
"""

from __future__ import annotations

from pathlib import Path

from infrarsi.contract import STATE_DIR, contract_path

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
    return contract_path(repo), doctor_path(repo), run_path(repo)


def claims_path(repo: Path) -> Path:
    """The model's claims about knob roles, kept by init for doctor to judge."""
    return state_dir(repo) / "claims.json"


def llm_config_path(root: Path) -> Path:
    """The LLM settings under ``root``: a repo, or the user's home for their own settings."""
    return state_dir(root) / "config.toml"


def patch_dir(repo: Path) -> Path:
    """The model's proposed diffs, ``<id>.diff`` each (``llm:<id>`` patches)."""
    return state_dir(repo) / "patches"


def proposals_path(repo: Path) -> Path:
    """The model's last answer, kept so that running again does not ask (nor pay) again."""
    return patch_dir(repo) / "proposals.json"


def trials_dir(repo: Path) -> Path:
    """The logs of trials run without a log folder of their own (the run's), one folder per trial."""
    return state_dir(repo) / "trials"


def doctor_logs_dir(repo: Path) -> Path:
    return state_dir(repo) / "doctor"


def verify_logs_dir(repo: Path) -> Path:
    return state_dir(repo) / "verify"


def report_path(repo: Path, fmt: str) -> Path:
    """The report's document in ``fmt`` (``md``, ``html``)."""
    return state_dir(repo) / f"report.{fmt}"


def plots_dir(repo: Path) -> Path:
    return state_dir(repo) / "report"
