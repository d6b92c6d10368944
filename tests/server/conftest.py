"""A dense GPT training repo per test, initialised once and copied; a client speaking LSP over stdio."""

from __future__ import annotations

import shutil
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
import pytest_lsp
from lsprotocol import types
from pytest_lsp import ClientServerConfig, LanguageClient, client_capabilities

from infrarsi.contract import VerifyPolicy, load_contract, save_contract
from infrarsi.knobs.rewrite import set_defaults
from infrarsi.stages.init import init

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "dense_gpt"
SERVER = [sys.executable, "-m", "infrarsi_server"]
XS_MODEL = {"block_size": 64, "n_layer": 2, "vocab_size": 512, "batch_size": 8, "micro_batch_size": 4}
"""docs/measured.md's XS size: ~0.05 s a step, a trial is mostly its ~5 s of start-up."""
PLANNED_STEPS = 30
"""The job's length as its owner would run it: what verification's long runs last (the editor's
tests are about the editor, not the precision a 200-step job would give them)."""
EDITOR_VERIFY = VerifyPolicy(candidates=1, most_rounds=3)
"""The contract's ``[verify]``: the best candidate alone, three rounds at most, for the same reason."""


def git(repo: Path, *args: str) -> str:
    out = subprocess.run(["git", "-c", "user.name=Test", "-c", "user.email=test@example.com", *args], cwd=repo,
                         check=True, capture_output=True, text=True)
    return out.stdout.strip()


@pytest.fixture(scope="session")
def template(tmp_path_factory) -> Path:
    repo = tmp_path_factory.mktemp("template") / "dense_gpt"
    shutil.copytree(FIXTURE, repo, ignore=shutil.ignore_patterns("__pycache__", ".infrarsi"))
    train = repo / "train.py"
    train.write_text(set_defaults(train.read_text(), XS_MODEL))
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "dense GPT")
    result = init(repo, warmup_steps=1, measured_steps=4, planned_steps=PLANNED_STEPS, budget_bytes=4 << 30)
    assert result.ok, result.message
    save_contract(replace(load_contract(repo), verify=EDITOR_VERIFY), repo)
    return repo


@pytest.fixture
def repo(template: Path, tmp_path: Path) -> Path:
    """A fresh copy (git history and contract included) that a test may change."""
    copy = tmp_path / "dense_gpt"
    shutil.copytree(template, copy, symlinks=True)
    return copy


@pytest_lsp.fixture(config=ClientServerConfig(server_command=SERVER))
async def client(lsp_client: LanguageClient, repo: Path):
    await lsp_client.initialize_session(types.InitializeParams(
        capabilities=client_capabilities("visual-studio-code"),
        root_uri=repo.as_uri(),
        workspace_folders=[types.WorkspaceFolder(uri=repo.as_uri(), name=repo.name)],
    ))
    yield
    await lsp_client.shutdown_session()
