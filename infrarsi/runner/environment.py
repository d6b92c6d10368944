"""The environment a trial starts with: an allow-list, never a copy of InfraRSI's own.

A trial runs code InfraRSI did not write (the user's job, a model-written diff), so it gets only
what a training job needs: the search path, locale, the accelerator, thread and framework settings,
the job's own variables (the contract's ``workload.env``, the ``K=V`` prefix of the owner's command) and InfraRSI's own (``INFRARSI_*``, set by
the runner). API keys, passwords, tokens and cloud credentials are never passed, even when their
names would match a prefix below. HOME is a private directory of the trial (caches land there).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path

PASSED = frozenset({
    "PATH", "LANG", "LANGUAGE", "TZ", "TERM", "LD_LIBRARY_PATH", "VIRTUAL_ENV", "CONDA_PREFIX",
    "PYTHONHASHSEED", "PYTHONDONTWRITEBYTECODE", "PYTHONPYCACHEPREFIX", "PYTHONWARNINGS", "PYTHONFAULTHANDLER",
    "HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE",
    "CUBLAS_WORKSPACE_CONFIG", "MASTER_ADDR", "MASTER_PORT",
})
"""Variables passed through by exact name."""

PASSED_PREFIXES = (
    "LC_", "CUDA_", "NVIDIA_", "NCCL_", "CUDNN_", "CUBLAS", "CUBLASLT_", "NVTE_", "GLOO_", "OMP_", "KMP_", "GOMP_",
    "MKL_", "OPENBLAS_", "TORCH_", "PYTORCH_", "TORCHINDUCTOR_", "TORCHDYNAMO_", "TRITON_", "INFRARSI_",
)
"""Variables passed through by prefix (secret-looking names excepted)."""

SECRET = re.compile(r"KEY|TOKEN|SECRET|PASSW|PASSWD|CREDENTIAL|AUTH|COOKIE|SESSION|PRIVATE", re.IGNORECASE)
"""Names never passed from InfraRSI's environment, whatever their prefix (``INFRARSI_API_KEY``…)."""

NEVER_PREFIXES = ("AWS_", "AZURE_", "GOOGLE_", "GCP_", "ANTHROPIC_", "OPENAI_", "PG", "DATABASE_", "GITHUB_",
                  "HF_TOKEN", "WANDB_", "SSH_", "GIT_")
"""Names never passed by prefix (a cloud or service account's settings are the user's, not the job's)."""


CREDENTIAL_URL = re.compile(r"://[^/@\s]*:[^/@\s]*@")
"""A URL with a password in it (``postgresql://user:pw@host``) is never passed, whatever its name."""


def passes(name: str, value: str = "") -> bool:
    """Whether a variable of InfraRSI's own environment may reach a trial."""
    if SECRET.search(name) or name.startswith(NEVER_PREFIXES) or CREDENTIAL_URL.search(value):
        return False
    return name in PASSED or name.startswith(PASSED_PREFIXES)


def trial_environment(*, home: Path, declared: Mapping[str, str] | None = None,
                      runner: Mapping[str, str] | None = None,
                      source: Mapping[str, str] | None = None) -> dict[str, str]:
    """The trial's environment.

    ``source`` (default: ``os.environ``) is filtered through the allow-list; ``declared`` (the
    contract's ``workload.env``) is the user's explicit choice and passed as written; ``runner``
    holds what InfraRSI sets for the trial (the probe file, PYTHONPATH additions…) and wins.
    """
    source = os.environ if source is None else source
    env = {name: value for name, value in source.items() if passes(name, value)}
    env.setdefault("PATH", os.defpath)
    env["HOME"] = str(home)
    env["PYTHONUNBUFFERED"] = "1"
    env.update(declared or {})
    env.update(runner or {})
    return env


def interpreter_env(*, pycache: Path) -> dict[str, str]:
    """The interpreter variables InfraRSI sets for every trial: they keep what a trial runs to its
    sources. Nothing is written (``PYTHONDONTWRITEBYTECODE``), and nothing is read from the
    ``__pycache__`` folders next to the sources (the user's, possibly stale, or any a candidate
    planted), because every module's bytecode is looked up under ``pycache``
    (``PYTHONPYCACHEPREFIX``): the prefix only InfraRSI writes, read-only in the sandbox
    (``bytecode.warm``), or an empty folder of the trial's own when it runs unsandboxed."""
    return {"PYTHONUNBUFFERED": "1", "PYTHONDONTWRITEBYTECODE": "1", "PYTHONPYCACHEPREFIX": str(pycache)}
