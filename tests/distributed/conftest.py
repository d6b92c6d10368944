"""Distributed runs: several `infrarsi run` workers sharing one study in a real PostgreSQL server.

The server comes from ``INFRARSI_TEST_PG_URL`` (``.ci/run`` starts one on 127.0.0.1 with
``tests/distributed/pg_server.sh``); without it the PostgreSQL tests skip. Each test gets a
database of its own when the role may create one, else its study is deleted before and after.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

PG_ENV = "INFRARSI_TEST_PG_URL"
ROOT = Path(__file__).resolve().parents[2]
PACED = ROOT / "tests" / "test_data" / "stages" / "paced"
HEARTBEAT_S = 1
GRACE_S = 4


def infrarsi_cmd() -> list[str]:
    exe = Path(sys.executable).with_name("infrarsi")
    return [str(exe)] if exe.exists() else [sys.executable, "-c", "from infrarsi.cli import main; main()"]


@pytest.fixture(scope="session")
def pg_server_url() -> str:
    url = os.environ.get(PG_ENV)
    if not url:
        pytest.skip(f"{PG_ENV} is not set: no PostgreSQL server to share a study in "
                    "(`.ci/run` starts one; by hand: eval \"$(tests/distributed/pg_server.sh start DIR)\")")
    return url


@pytest.fixture
def pg_url(pg_server_url):
    """A fresh database on the test server (dropped afterwards), or the server's own database."""
    import sqlalchemy as sa

    name = f"infrarsi_{secrets.token_hex(4)}"
    admin = sa.create_engine(pg_server_url, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as conn:
            conn.execute(sa.text(f'CREATE DATABASE "{name}"'))
    except sa.exc.SQLAlchemyError:  # no CREATEDB: the server's database is the tests' to own
        admin.dispose()
        _drop_studies(pg_server_url)
        yield pg_server_url
        _drop_studies(pg_server_url)
        return
    url = sa.engine.make_url(pg_server_url).set(database=name).render_as_string(hide_password=False)
    yield url
    with admin.connect() as conn:
        conn.execute(sa.text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    admin.dispose()


def _drop_studies(url: str) -> None:
    import optuna

    for summary in optuna.get_all_study_summaries(url):
        optuna.delete_study(study_name=summary.study_name, storage=url)


def git_repo(path: Path, source: Path) -> Path:
    """A git copy of ``source`` (its Python files), committed."""
    path.mkdir(parents=True)
    for src in source.glob("*.py"):
        shutil.copy(src, path / src.name)
    for args in (["init", "-q"], ["add", "-A"], ["-c", "user.name=t", "-c", "user.email=t@localhost", "commit", "-qm", "baseline"]):
        subprocess.run(["git", "-C", str(path), *args], check=True)
    return path


def cli(*args: str, env: dict[str, str] | None = None, timeout: float = 600) -> dict:
    proc = subprocess.run([*infrarsi_cmd(), *args, "--json"], capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **(env or {})})
    assert proc.returncode in (0, 1), f"{args}: exit {proc.returncode}\n{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}"
    return json.loads(proc.stdout)


@pytest.fixture(scope="session")
def paced_prepared(tmp_path_factory) -> Path:
    """The paced workload in git, after init and doctor: the state every worker's checkout starts from."""
    repo = git_repo(tmp_path_factory.mktemp("paced") / "repo", PACED)
    cli("init", str(repo), "--budget-gib", "4")
    cli("doctor", str(repo), "--repeats", "2")
    return repo


def checkout(prepared: Path, dest: Path) -> Path:
    """A worker's own checkout (as on another machine): same contract, so the same study."""
    shutil.copytree(prepared, dest, symlinks=True)
    return dest


def worker_env(pg: str) -> dict[str, str]:
    """Short heartbeats so a killed worker's trial goes stale in seconds; the bank shared too."""
    return {**os.environ, "INFRARSI_HEARTBEAT_S": str(HEARTBEAT_S), "INFRARSI_HEARTBEAT_GRACE_S": str(GRACE_S),
            "INFRARSI_BANK_URL": pg, "PYTHONUNBUFFERED": "1"}


def start_worker(repo: Path, pg: str, trials: int, log: Path) -> subprocess.Popen:
    """`infrarsi run` as its own process: JSON summary to ``log``, progress to ``log.err``."""
    with open(log, "w") as out, open(log.with_suffix(".err"), "w") as err:
        return subprocess.Popen([*infrarsi_cmd(), "run", str(repo), "--storage", pg, "--trials", str(trials), "--json"],
                                stdout=out, stderr=err, env=worker_env(pg))


def finish_worker(proc: subprocess.Popen, log: Path, timeout: float = 600) -> dict:
    proc.wait(timeout=timeout)
    text = log.read_text()
    assert proc.returncode in (0, 1), f"worker exit {proc.returncode}\n{text[-2000:]}\n{log.with_suffix('.err').read_text()[-3000:]}"
    return json.loads(text)


def wait_for(predicate, timeout: float, what: str, poll: float = 0.1):
    limit = time.monotonic() + timeout
    while time.monotonic() < limit:
        value = predicate()
        if value:
            return value
        time.sleep(poll)
    raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")
