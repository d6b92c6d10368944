"""InfraRSI's side of the launcher: what a trial adds to the job's environment, and the channel the
job's records arrive on.

The job side lives in ``site/`` (a ``sitecustomize`` and ``_infrarsi_launcher``), put first on the
trial's PYTHONPATH so it loads before the user's code in every Python process of the job. It needs
only the standard library and torch. docs/launcher.md describes what it observes and the records.
"""

from __future__ import annotations

import os
from pathlib import Path

SITE_DIR = Path(__file__).resolve().parent / "site"
ENV_RECORDS = "INFRARSI_RECORDS"
ENV_STEPS = "INFRARSI_STEPS"
ENV_WARMUP = "INFRARSI_WARMUP_STEPS"


def launcher_env(records: Path, *, steps: int, warmup_steps: int, pythonpath: str | None) -> dict[str, str]:
    """The variables a trial sets on top of its environment: the launcher first on PYTHONPATH (ahead
    of ``pythonpath``, the one the job would have had), the channel, and when to stop."""
    path = str(SITE_DIR) + (os.pathsep + pythonpath if pythonpath else "")
    return {"PYTHONPATH": path, ENV_RECORDS: str(records), ENV_STEPS: str(steps), ENV_WARMUP: str(warmup_steps)}
