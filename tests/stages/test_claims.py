"""The model's role claims are believed only when doctor's trial agrees (infrarsi/stages/claims.py).

The end-to-end test runs init with the real anthropic client against the loopback Messages server,
then doctor's real trials on tests/test_data/stages/claimed: the script sets its thread count
(``--pool``) and its seed (``--salt``) through names built at run time, so the rules leave both
unknown. The model claims both are thread counts: the trial moving ``--pool`` changes the step
time with the loss held (confirmed, unlocked), the one moving ``--salt`` changes the loss
trajectory (refuted, locked).
"""

from __future__ import annotations

import shutil
from dataclasses import replace
from pathlib import Path

import pytest

from infrarsi.contract import Contract, Knob, LossInvariant, MemoryBudget, Scope, Workload, load_contract
from infrarsi.knobs.llm_roles import TOOL_NAME, Claim, load_claims, save_claims
from infrarsi.records.files import claims_path
from infrarsi.stages.claims import check_claims, probe_values, unlocked
from infrarsi.stages.doctor import doctor
from infrarsi.stages.init import init
from infrarsi.trials import Candidate, TrialResult, TrialStatus
from tests.stages.conftest import git_repo
from tests.support.messages_server import MessagesServer, tool_use_reply

CLAIMED = Path(__file__).parents[1] / "test_data" / "stages" / "claimed"


def contract(*knobs: Knob, global_batch: int = 32) -> Contract:
    return Contract(
        workload=Workload(entry="train.py", command=["python", "train.py"], tokens_per_step=0, seq_len=0,
                          global_batch=global_batch, seed=0, warmup_steps=3, measured_steps=5, planned_steps=8),
        loss=LossInvariant(compare_steps=8, tolerance=1e-4, numerics_tolerance=1e-3),
        memory=MemoryBudget(budget_bytes=2**30, device="cpu"),
        scope=Scope(editable=["train.py"]),
        knobs=list(knobs),
    )


def unknown(name: str, default, type_: str = "int") -> Knob:
    return Knob(name=name, role="unknown", type=type_, default=default, flag=f"--{name}")


def test_a_claimed_micro_batch_is_tried_at_half_with_the_accumulation_doubled():
    c = contract(unknown("mb", 8), Knob(name="accum", role="grad_accum", type="int", default=4, flag="--accum"))
    assert probe_values(c, Claim("mb", "micro_batch", "x.view(mb, -1)")) == {"mb": 4, "accum": 8}
    # Without an accumulation knob the global batch cannot hold: the trial says so (the work changes).
    assert probe_values(contract(unknown("mb", 8), global_batch=8), Claim("mb", "micro_batch", "")) == {"mb": 4}


def test_a_claimed_thread_count_is_tried_at_another_count_and_one_with_no_other_value_is_not_tried():
    assert probe_values(contract(unknown("pool", 2)), Claim("pool", "threads", "")) == {"pool": 1}
    assert "no other value" in probe_values(contract(unknown("mode", "x", "str")), Claim("mode", "threads", ""))


def test_only_confirmed_claims_unlock_their_knob_with_the_claimed_role():
    c = contract(unknown("pool", 2), unknown("rows", 64))
    judged = [Claim("pool", "threads", "", "confirmed"), Claim("rows", "threads", "", "refuted")]
    after = unlocked(c, judged)
    assert after.knob("pool").role == "threads" and after.knob("pool").tunable and 1 in after.knob("pool").domain
    assert after.knob("rows") == c.knob("rows")


def ok(step: float, samples: int = 64, losses=(2.0, 1.9)) -> TrialResult:
    return TrialResult(status=TrialStatus.OK, candidate=Candidate(), step_times=[step] * 3, losses=list(losses),
                       samples_per_step=samples)


def test_a_step_time_change_within_doctors_noise_confirms_nothing():
    c = contract(unknown("pool", 2))
    claims = [Claim("pool", "threads", "")]
    [within] = check_claims(c, claims, ok(0.100), 1e-4, 0.20, lambda claim, values: ok(0.115))
    assert within.status == "refuted" and "did not move" in within.why and "pool=1" in within.why
    [beyond] = check_claims(c, claims, ok(0.100), 1e-4, 0.20, lambda claim, values: ok(0.150))
    assert beyond.status == "confirmed"


def test_a_disturbed_probe_leaves_the_claim_unconfirmed():
    c = contract(unknown("pool", 2))
    disturbed = replace(ok(0.3), status=TrialStatus.DISTURBED, detail="other processes used 1.9 of the job's cores")
    [claim] = check_claims(c, [Claim("pool", "threads", "")], ok(0.1), 1e-4, 0.05, lambda *_: disturbed)
    assert claim.status == "unconfirmed" and "disturbed" in claim.why


def test_a_malformed_claims_file_is_named_and_read_as_none(tmp_path):
    save_claims(tmp_path, [Claim("pool", "threads", "x")])
    assert load_claims(tmp_path) == ([Claim("pool", "threads", "x")], "")
    claims_path(tmp_path).write_text("{not json")
    claims, problem = load_claims(tmp_path)
    assert claims == [] and str(claims_path(tmp_path)) in problem


@pytest.mark.e2e
def test_doctor_confirms_the_true_claim_unlocks_it_and_refutes_the_false_one(tmp_path, monkeypatch):
    repo = tmp_path / "claimed"
    shutil.copytree(CLAIMED, repo, ignore=shutil.ignore_patterns("__pycache__"))
    git_repo(repo)
    with MessagesServer() as server:
        monkeypatch.setenv("HOME", str(tmp_path / "home"))
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test")
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
        monkeypatch.setenv("INFRARSI_LLM_MAX_RETRIES", "0")
        server.script(tool_use_reply(TOOL_NAME, {"claims": [
            {"name": "pool", "role": "threads", "evidence": 'getattr(torch, "set_" + "num_threads")(args.pool)'},
            {"name": "salt", "role": "threads", "evidence": 'getattr(torch, "manual_" + "seed")(args.salt)'}]}))
        done = init(repo, budget_bytes=2**30)
        assert done.ok, done.message
        assert {c["name"]: c["status"] for c in done.claims} == {"pool": "unconfirmed", "salt": "unconfirmed"}
        before = load_contract(repo)
        assert before.knob("pool").role == "unknown" and before.knob("salt").role == "unknown"
        assert not before.knob("pool").tunable and not before.knob("salt").tunable
    done = doctor(repo, repeats=2)
    assert done.report is not None, done.message
    claims = {c["name"]: c for c in done.report.claims}
    assert claims["pool"]["status"] == "confirmed", claims
    assert claims["salt"]["status"] == "refuted" and "loss trajectory" in claims["salt"]["why"], claims
    after = load_contract(repo)
    assert after.knob("pool").role == "threads" and after.knob("pool").tunable
    assert after.knob("salt").role == "unknown" and not after.knob("salt").tunable
    assert {c.name: c.status for c in load_claims(repo)[0]} == {"pool": "confirmed", "salt": "refuted"}
