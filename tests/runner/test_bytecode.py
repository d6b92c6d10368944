"""The bytecode prefix sandboxed trials share: what the warm-up imports, that it runs once, and
that a trial can read it but not write it."""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

import pytest

from infrarsi.contract import Knob
from infrarsi.runner import bytecode, sandbox
from infrarsi.runner.trial import TrialSpec, run_trial
from infrarsi.trials import Candidate, TrialStatus

pytestmark = pytest.mark.skipif(sandbox.bwrap_problem() is not None, reason="needs the bubblewrap sandbox")


def test_imported_modules_are_the_installed_ones_the_sources_name(tmp_path):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "model.py").write_text("import torch.nn as nn\nfrom . import layers\n")
    (tmp_path / "train.py").write_text(
        "import json, os.path\nfrom torch.utils.data import DataLoader\nimport pkg.model\nimport helpers\n"
        "def main():\n    import transformers\n")
    (tmp_path / "helpers.py").write_text("import sys\n")
    (tmp_path / "broken.py").write_text("def (\n")
    assert bytecode.imported_modules(tmp_path) == {"torch.nn", "json", "os.path", "torch.utils.data", "transformers"}


def test_each_virtual_environment_of_one_interpreter_has_its_own_prefix(tmp_path, monkeypatch):
    # Venvs share their interpreter's binary; their packages (and what was warmed) differ.
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    mine = bytecode.cache_dir()
    monkeypatch.setattr(sys, "prefix", str(tmp_path / "another-venv"))
    assert bytecode.cache_dir() != mine and bytecode.cache_dir().parent == mine.parent


@pytest.mark.e2e
def test_the_warm_up_compiles_once_into_the_prefix(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "train.py").write_text("import json\nimport not_installed_anywhere\n")
    cache = bytecode.warm(repo)
    assert cache == bytecode.cache_dir() and str(tmp_path / "cache") in str(cache)
    json_pyc = Path(str(cache) + os.path.dirname(__import__("json").__file__)) / f"__init__.{sys.implementation.cache_tag}.pyc"
    torch_pyc = Path(str(cache) + os.path.dirname(__import__("torch").__file__)) / f"__init__.{sys.implementation.cache_tag}.pyc"
    assert json_pyc.is_file() and torch_pyc.is_file()
    warmed = (cache / bytecode.WARMED_FILE).read_text().split()
    assert {"json", "not_installed_anywhere", "torch.utils.flop_counter"} <= set(warmed)
    # Compiled, never imported: what torch loads lazily (dynamo at the first optimizer step, and sympy,
    # a distribution torch requires) and the standard library nobody named.
    lazily = [_pyc(cache, "torch", "_dynamo", "convert_frame.py"), _pyc(cache, "sympy", "__init__.py"),
              _pyc(cache, "xml", "dom", "minidom.py")]
    assert all(p.is_file() for p in lazily), [p for p in lazily if not p.is_file()]
    compiled = (cache / bytecode.COMPILED_FILE).read_text().split()
    assert any(k.startswith(f"torch=={__import__('torch').__version__}@") for k in compiled)
    assert any(k.startswith("sympy==") for k in compiled)
    stamps = [p.stat().st_mtime_ns for p in (torch_pyc, *lazily)]
    assert bytecode.warm(repo) == cache and [p.stat().st_mtime_ns for p in (torch_pyc, *lazily)] == stamps
    assert (cache / bytecode.WARMED_FILE).read_text().split() == warmed
    assert (cache / bytecode.COMPILED_FILE).read_text().split() == compiled


def _pyc(cache: Path, package: str, *parts: str) -> Path:
    """Where the prefix holds the bytecode of ``package``'s ``parts`` (a package found without importing it)."""
    source = Path(importlib.util.find_spec(package).origin).parent.joinpath(*parts)
    return Path(str(cache) + str(source.parent)) / f"{source.stem}.{sys.implementation.cache_tag}.pyc"


def test_the_distributions_behind_torch_are_what_it_requires():
    names = {d.metadata["Name"].lower() for d in bytecode.distributions_behind(frozenset({"torch"}))}
    assert {"torch", "sympy", "mpmath"} <= names and "infrarsi" not in names and "optuna" not in names


@pytest.mark.e2e
def test_a_trial_reads_the_shared_prefix_and_cannot_write_it(make_repo):
    repo, contract = make_repo("tampers.py")
    (repo / "late.py").write_text('VALUE = "source"\n')
    contract.knobs.append(Knob(name="how", role="unknown", type="str", default="nothing", flag="--how"))
    result = run_trial(TrialSpec(repo=repo, contract=contract, candidate=Candidate(knobs={"how": "prefix"})))
    assert result.status is TrialStatus.OK, result.detail
    log = Path(result.log_path).read_text()
    assert "prefix write refused: Read-only file system" in log, log
    assert f"pycache prefix {sandbox.BYTECODE_MOUNT};" in log and "writes bytecode: False" in log, log


def test_a_distribution_reinstalled_at_the_same_version_is_compiled_again(tmp_path, monkeypatch):
    # A virtual environment made again at the same path: same versions, new sources. Bytecode of the
    # old sources no longer matches them, and Python would compile every module at every start.
    site = tmp_path / "site"
    (site / "fakepkg").mkdir(parents=True)
    (site / "fakepkg-1.0.dist-info").mkdir()
    (site / "fakepkg-1.0.dist-info" / "RECORD").write_text("fakepkg/__init__.py,,\nfakepkg-1.0.dist-info/METADATA,,\n")
    source, metadata = site / "fakepkg" / "__init__.py", site / "fakepkg-1.0.dist-info" / "METADATA"
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.setattr(bytecode, "_stdlib_sources", list)
    cache = tmp_path / "cache"

    def install(stamp_ns: int) -> None:
        source.write_text("VALUE = 1\n")
        metadata.write_text("Metadata-Version: 2.1\nName: fakepkg\nVersion: 1.0\n")
        for path in (source, metadata):
            os.utime(path, ns=(stamp_ns, stamp_ns))

    def compiled_for_source() -> bool:
        pyc = Path(str(cache) + str(source.parent)) / f"__init__.{sys.implementation.cache_tag}.pyc"
        return pyc.is_file() and int.from_bytes(pyc.read_bytes()[8:12], "little") == int(source.stat().st_mtime)

    install(1_700_000_000 * 10**9)
    bytecode._compile_into(cache, frozenset({"fakepkg"}))
    assert compiled_for_source()
    install(1_800_000_000 * 10**9)
    assert not compiled_for_source()
    bytecode._compile_into(cache, frozenset({"fakepkg"}))
    assert compiled_for_source()
