"""A storage URL's password is the user's: never written under .infrarsi/, never shown."""

from __future__ import annotations

import os

import optuna
import pytest
from sqlalchemy.engine import make_url

from infrarsi.cli import main
from infrarsi.records import load_run
from infrarsi.stages.report import report
from infrarsi.stages.run import run

PG_ENV = "INFRARSI_TEST_PG_URL"


def state_bytes(repo) -> dict[str, bytes]:
    return {str(p): p.read_bytes() for p in (repo / ".infrarsi").rglob("*") if p.is_file()}


def holding(repo, secret: str) -> list[str]:
    return sorted(path for path, data in state_bytes(repo).items() if secret.encode() in data)


def test_an_unreachable_storage_is_named_without_its_password(prepared, capsys):
    url = "postgresql+psycopg://infrarsi:s3cret-pw@127.0.0.1:9/nowhere"
    result = run(prepared, trials=1, storage=url, use_bank=False)
    assert result.status == "error" and "cannot be opened" in result.message
    assert "s3cret-pw" not in result.message and "infrarsi:***@127.0.0.1:9/nowhere" in result.message
    assert main(["run", str(prepared), "--storage", url, "--trials", "1", "--no-bank"]) == 1
    assert "s3cret-pw" not in "".join(capsys.readouterr())
    assert holding(prepared, "s3cret-pw") == []


def test_the_password_is_nowhere_under_the_state_dir(prepared):
    url = os.environ.get(PG_ENV)
    if not url:
        pytest.skip(f"{PG_ENV} not set: no PostgreSQL server with a password")
    password = make_url(url).password
    assert password
    result = run(prepared, trials=1, storage=url, use_bank=False)
    try:
        assert result.status in ("ok", "no_promotion"), result.message
        assert load_run(prepared).storage_url == make_url(url).render_as_string(hide_password=True)
        # Without the password the study cannot be reopened: the report says so, with the URL hidden.
        shown = report(prepared)
        assert shown.status == "ok" and any("could not be opened" in n for n in shown.report.notes)
        assert holding(prepared, password) == []
        # Given again, it reopens the study; still nothing written holds it.
        again = report(prepared, storage=url)
        assert again.status == "ok" and not any("could not be opened" in n for n in again.report.notes)
        assert holding(prepared, password) == []
    finally:
        optuna.delete_study(study_name=result.study_name, storage=url)
