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
ENV_WARMUP = "INFRARSI_WARMUP_STEPS"
ENV_CUDA_BUDGET = "INFRARSI_CUDA_BUDGET_BYTES"


def launcher_env(records: Path, *, warmup_steps: int, pythonpath: str | None,
                 cuda_budget: int | None = None) -> dict[str, str]:
    """The variables a trial sets on top of its environment: the launcher first on PYTHONPATH (ahead
    of ``pythonpath``, the one the job would have had), the channel, the warm-up (FLOPs are counted
    there), and on a GPU the memory budget the launcher holds the CUDA caching allocator to. Never
    how many steps the run will take: InfraRSI says when to stop (``control.StepControl``)."""
    path = str(SITE_DIR) + (os.pathsep + pythonpath if pythonpath else "")
    env = {"PYTHONPATH": path, ENV_RECORDS: str(records), ENV_WARMUP: str(warmup_steps)}
    if cuda_budget is not None:
        env[ENV_CUDA_BUDGET] = str(cuda_budget)
    return env
