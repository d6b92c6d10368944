"""`infrarsi bank show` / `infrarsi bank forget` as a user runs them, over a real bank (a SQLite
file, and PostgreSQL when INFRARSI_TEST_PG_URL is set)."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest

from infrarsi.bank import EffectFinding, ExperienceBank, PatchFinding, WorkloadSignature
from infrarsi.contract import save_contract
from infrarsi.hardware import fingerprint
from infrarsi.search.synthetic import contract_with, dense_knobs

INFRARSI = Path(sys.executable).parent / "infrarsi"


def infrarsi(*args: str, url: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "INFRARSI_BANK_URL": url}
    return subprocess.run([str(INFRARSI), *args], capture_output=True, text=True, env=env, timeout=120)


@pytest.fixture
def workload(tmp_path) -> Path:
    """A repository after init: its contract (the dense fixture's knobs), no doctor yet."""
    repo = tmp_path / "job"
    repo.mkdir()
    save_contract(contract_with(dense_knobs()), repo)
    return repo


def planted(url: str, repo: Path) -> tuple[str, str]:
    """Two runs on this machine: an old one with a disturbed thread trial, and a newer one."""
    signature = WorkloadSignature.from_contract(contract_with(dense_knobs()), {})
    other = WorkloadSignature(family="moe", params_bucket=30, tokens_bucket=20, seq_bucket=12, device="cuda",
                              launcher="torchrun")
    here = fingerprint().id
    with ExperienceBank(url) as bank:
        old = bank.record_run(signature=signature, hardware_id=here, hardware="this machine",
                              recorded_at=datetime(2026, 1, 5, tzinfo=UTC), effects=[
                                  EffectFinding(key="threads=1", role="threads", value=1, baseline=2,
                                                time_log=math.log(11.93), time_sd=0.01, n=1, noise_cv=0.03),
                                  EffectFinding(key="patch:sdpa_attention", role="patch", value="on", baseline="off",
                                                time_log=math.log(1.15), time_sd=0.01, n=3)],
                              verdicts=[PatchFinding(patch="sdpa_attention", verdict="ok")])
        new = bank.record_run(signature=other, hardware_id="h100", hardware="H100", effects=[
            EffectFinding(key="compile=True", role="compile", value=True, baseline=False, time_log=-0.3,
                          time_sd=0.02, n=4, noise_cv=0.01)])
    return old, new


def test_show_lists_every_finding_with_how_far_it_is_trusted(bank_url, workload):
    old, new = planted(bank_url, workload)
    shown = infrarsi("bank", "show", "--json", url=bank_url)
    assert shown.returncode == 0, shown.stderr
    data = json.loads(shown.stdout)
    assert [r["id"] for r in data["runs"]] == [old, new]
    threads = next(e for e in data["runs"][0]["effects"] if e["key"] == "threads=1")
    assert threads["factor"] == pytest.approx(11.93) and threads["n"] == 1 and threads["noise_cv"] == 0.03
    assert threads["trusted_sd"] >= math.log(11.93) > 100 * threads["time_sd"]
    assert "@" not in data["url"] or "***" in data["url"]  # a team URL's password is not printed

    # For a workload: only the runs it would use, and the priors a run there would start from.
    shown = infrarsi("bank", "show", "--workload", str(workload), "--json", url=bank_url)
    assert shown.returncode == 0, shown.stderr
    data = json.loads(shown.stdout)
    assert [r["id"] for r in data["runs"]] == [old]
    priors = {p["key"]: p for p in data["workload"]["priors"]}
    assert set(priors) == {"threads=1", "patch:sdpa_attention"}
    assert priors["threads=1"]["low"] <= 1.0 and "1 trial(s)" in priors["threads=1"]["source"]
    assert "run noise unknown" in priors["patch:sdpa_attention"]["source"]

    text = infrarsi("bank", "show", url=bank_url)
    assert text.returncode == 0 and "threads=1" in text.stdout and old in text.stdout, text.stderr


def test_forget_deletes_a_finding_a_setting_a_run_or_everything_before_a_date(bank_url, workload):
    old, new = planted(bank_url, workload)
    data = json.loads(infrarsi("bank", "show", "--json", url=bank_url).stdout)
    threads_id = next(e["id"] for e in data["runs"][0]["effects"] if e["key"] == "threads=1")

    done = infrarsi("bank", "forget", str(threads_id), "--json", url=bank_url)
    assert done.returncode == 0 and json.loads(done.stdout)["forgotten"]["effects"] == 1, done.stderr
    done = infrarsi("bank", "forget", "patch:sdpa_attention", url=bank_url)
    assert done.returncode == 0 and "1 effect(s), 1 patch verdict(s)" in done.stdout, done.stderr
    again = infrarsi("bank", "forget", "patch:sdpa_attention", url=bank_url)
    assert again.returncode == 1 and "nothing to forget" in again.stdout

    done = infrarsi("bank", "forget", "--before", "2026-02-01", "--json", url=bank_url)
    assert done.returncode == 0 and json.loads(done.stdout)["forgotten"]["runs"] == 1, done.stderr
    with ExperienceBank(bank_url) as bank:
        assert [r.id for r in bank.runs()] == [new]
    done = infrarsi("bank", "forget", "--run", new, url=bank_url)
    assert done.returncode == 0, done.stderr
    assert json.loads(infrarsi("bank", "show", "--json", url=bank_url).stdout)["runs"] == []


def test_bad_input_is_one_line_and_changes_nothing(bank_url, workload, tmp_path):
    planted(bank_url, workload)
    bad = infrarsi("bank", "forget", "--before", "last tuesday", url=bank_url)
    assert bad.returncode == 2 and "not a date" in bad.stderr and "Traceback" not in bad.stderr
    both = infrarsi("bank", "forget", "threads=1", "--run", "abc", url=bank_url)
    assert both.returncode == 2 and "not allowed with" in both.stderr
    missing = infrarsi("bank", "show", "--workload", str(tmp_path / "nowhere"), url=bank_url)
    assert missing.returncode == 2 and "Traceback" not in missing.stderr and "infrarsi init" in missing.stderr
    with ExperienceBank(bank_url) as bank:
        assert len(bank.runs()) == 2
