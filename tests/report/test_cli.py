"""`infrarsi report` on a built state directory."""

from __future__ import annotations

import json

import pytest

from infrarsi.cli import console, main


@pytest.fixture(autouse=True)
def wide_console(monkeypatch):
    """Captured output is not a terminal: rich would fold the tables at 80 columns."""
    monkeypatch.setattr(console.console, "width", 240)


def test_text_shows_the_tables_the_diff_and_the_reproduce_command(repo, capsys):
    assert main(["report", str(repo)]) == 0
    out = capsys.readouterr().out
    for words in ("Baseline against promoted", "all failures", "timeout", "interrupted", "Memory price per setting",
                  "✗ miscalibrated", "zero_grad(set_to_none=True)", "--micro_batch_size=8",
                  "writes +zero_grad_set_to_none into the source"):
        assert words in out, words


def test_json_is_the_report(repo, capsys):
    assert main(["report", str(repo), "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["job_speedup"][0] > 1 and {t["status"] for t in data["trials"]} >= {"ok", "oom", "timeout"}


def test_md_writes_the_file_and_says_where(repo, capsys):
    assert main(["report", str(repo), "--format", "md"]) == 0
    assert str(repo / ".infrarsi" / "report.md") in capsys.readouterr().out
    assert not (repo / ".infrarsi" / "report.html").exists()


def test_a_refusal_is_an_error_and_a_nonzero_exit(repo, capsys):
    (repo / "data.py").write_text("")
    assert main(["report", str(repo)]) == 2
    assert "data.py" in capsys.readouterr().err
