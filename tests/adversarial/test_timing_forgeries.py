"""The timing forgeries of timing_forgeries.py, each served as a model's proposal by the loopback
Messages server and run through a real ``infrarsi run --trials N --json`` (search and
re-verification): same training work, moved in time (or heard of at another time), must not be
promoted; neither may a genuinely slower change, nor a no-op (the A/A case).

Each case gets its own run on its own copy of the prepared job (one proposal per run, within
MAX_PATCHES): re-verification takes only the top ``[verify] candidates`` ranked candidates and the fastest
measured one, so several forgeries in one run would not each get a verdict, and the search could
combine two of them into one candidate.

The table the test prints (``pytest -s``): case | status | record-based step speed-up |
whole-process job speed-up | promoted | reason. The two speed-up columns come from each verdict in
the run's JSON: ``record_step_speedup`` and ``job_speedup`` (point [low, high]); "-" where the
verdict has no such key, or there is no verdict (the case was not re-verified).

At b277dbd the promoted number is modelled from the launcher's in-process records (start-up +
planned steps x median measured step), and every forgery here is promoted: this test fails there,
by design. It states what must hold once the deciding number is taken from whole processes.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from infrarsi.contract import load_contract
from infrarsi.patches.llm_proposals import MAX_PATCHES, TOOL_NAME, diff_id
from tests.adversarial.conftest import INFRARSI
from tests.adversarial.timing_forgeries import AA, CASES, FORGERIES, SLOWER
from tests.support.messages_server import MessagesServer, tool_use_reply

pytestmark = pytest.mark.e2e

PER_RUN = 1
"""Proposals per run (at most MAX_PATCHES): one, so each case is re-verified on its own."""
TRIALS = 2
"""The baseline and the proposal's validation; re-verification follows (a search trial adds nothing here)."""
QUIET_S = 300
"""``--wait-for-quiet``: the machine may be shared (other tests' trials); wait for it to be quiet."""
ATTEMPTS = 3
"""A run the machine's load stopped (the baseline disturbed, or the machine stayed busy) is run
again, as its message says to: it continues the same study."""


def _infrarsi_run(repo: Path, server_url: str, model: str, home: Path) -> dict:
    """conftest.infrarsi_run with ``--wait-for-quiet``, run again while the machine's load stops it."""
    env = {**os.environ, "HOME": str(home), "ANTHROPIC_API_KEY": "sk-test", "ANTHROPIC_BASE_URL": server_url,
           "INFRARSI_ANTHROPIC_MODEL": model, "INFRARSI_LLM_MAX_RETRIES": "0"}
    for _ in range(ATTEMPTS):
        done = subprocess.run([str(INFRARSI), "run", str(repo), "--trials", str(TRIALS), "--no-bank",
                               "--wait-for-quiet", str(QUIET_S), "--json"],
                              env=env, capture_output=True, text=True, timeout=3600)
        assert done.returncode in (0, 1) and done.stdout.strip(), done.stderr[-3000:]
        result = json.loads(done.stdout)
        busy = (result["status"] == "error" and "disturbed" in result["message"]) or (
            result["status"] == "no_promotion" and result["message"].startswith("stopped without promoting"))
        if not busy:
            break
    return result


def _measured_job(result: dict, name: str) -> str:
    """The candidate's job time from its own trials' step records (what ranks it for
    re-verification) beside the baseline's: why a validated candidate was not re-verified."""
    jobs = {r["kind"]: r["job_s"] for r in result["trials"] if r["job_s"]
            and (r["kind"] == "baseline" or name in r["candidate"]["patches"])}
    if "baseline" not in jobs or "validation" not in jobs:
        return ""
    return f"its trial's job {jobs['validation']:.2f} s by its records, the baseline's {jobs['baseline']:.2f} s"


def _interval(value) -> str:
    if not value:
        return "-"
    point, low, high = value
    return f"{point:.3f}x [{low:.3f}, {high:.3f}]"


def test_no_timing_forgery_is_promoted(prepared_job: Path, tmp_path: Path) -> None:
    assert PER_RUN <= MAX_PATCHES
    reference = load_contract(prepared_job).loss.reference
    groups = [CASES[i:i + PER_RUN] for i in range(0, len(CASES), PER_RUN)]

    rows: dict[str, dict] = {}
    outcomes: list[str] = []
    with MessagesServer() as server:
        for number, group in enumerate(groups):
            repo = Path(shutil.copytree(prepared_job, tmp_path / f"job-{number}", symlinks=True))
            diffs = {case.name: case.build(repo, reference) for case in group}
            names = {case.name: f"llm:{diff_id(diffs[case.name])}" for case in group}
            server.script(tool_use_reply(TOOL_NAME, {"patches": [
                {"title": c.name, "rationale": c.forges, "diff": diffs[c.name]} for c in group]}))
            result = _infrarsi_run(repo, server.url, f"claude-timing-{number}", home=tmp_path / "home")
            (tmp_path / f"run-{number}.json").write_text(json.dumps(result, indent=1, default=str))
            assert result["status"] in ("ok", "no_promotion"), result["message"]
            checks = {c["name"]: c for c in result["patch_checks"]}
            promoted = set(result["promoted"]["candidate"]["patches"]) if result["promoted"] else set()
            for case in group:
                name = names[case.name]
                check = checks.get(name, {"status": "missing", "reason": "no patch check for this proposal"})
                verdicts = [v for v in result["verdicts"] if name in v["candidate"]["patches"]]
                alone = [v for v in verdicts if v["candidate"]["patches"] == [name]]
                verdict = (alone or verdicts or [None])[0]
                rows[case.name] = {
                    "status": check["status"], "check_reason": check["reason"], "verdict": verdict,
                    "promoted": name in promoted or any(v["promoted"] for v in verdicts),
                    "search": _measured_job(result, name), "run_message": result["message"],
                }
            outcomes.append(f"run {number} ({', '.join(c.name for c in group)}): {result['message']} " + "; ".join(
                f"{v['candidate']['patches']}: {v['reason']}" for v in result["verdicts"]))
        asked = [r for r in server.requests if r.body["tool_choice"]["name"] == TOOL_NAME]
        assert len(asked) == len(groups)

    print(f"\nruns' JSON: {tmp_path}/run-*.json\n" + "\n".join(outcomes))
    print("\ncase | status | record-based step speed-up | whole-process job speed-up | promoted | reason")
    for case in CASES:
        row = rows[case.name]
        verdict = row["verdict"] or {}
        reason = verdict.get("reason") or row["check_reason"] or f"not re-verified: {row['search']}"
        print(f"{case.name} | {row['status']} | {_interval(verdict.get('record_step_speedup'))} | "
              f"{_interval(verdict.get('job_speedup'))} | {'yes' if row['promoted'] else 'no'} | {reason[:160]}")

    for case in AA:
        assert not rows[case.name]["promoted"], f"the A/A case {case.name} was promoted: {rows[case.name]}"
    for case in SLOWER:
        assert not rows[case.name]["promoted"], f"the slower case {case.name} was promoted: {rows[case.name]}"
    for case in FORGERIES:
        row = rows[case.name]
        assert not row["promoted"], f"{case.name} was promoted: {row['verdict'] and row['verdict']['reason']}"
        verdict = row["verdict"]
        # Refused before any trial, refused in re-verification, or never ranked ahead of the
        # baseline: its own trials measured it no faster, so there was nothing to verify.
        named = (row["status"] not in ("validated", "skipped", "missing") and row["check_reason"].strip()) or (
            verdict is not None and verdict["reason"].strip() and not verdict["promoted"]) or (
            verdict is None and row["search"] and row["run_message"].startswith("no candidate ranked ahead"))
        assert named, f"{case.name} ends without a named reason: check {row['status']!r}, verdict {verdict}"
