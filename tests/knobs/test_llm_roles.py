"""The model's roles for knobs the rules leave unknown (infrarsi/knobs/llm_roles.py): the real
anthropic client against the loopback Messages server; a claim is believed only when a trial agrees."""

from __future__ import annotations

import textwrap

import pytest

from infrarsi.knobs.llm_roles import TOOL_NAME, Claim
from infrarsi.stages.claims import judge
from infrarsi.stages.init import init
from infrarsi.trials import Candidate, TrialResult, TrialStatus
from tests.support.messages_server import MessagesServer, tool_use_reply

SCRIPT = """
import argparse
import torch
import mylib
p = argparse.ArgumentParser()
p.add_argument("--pool", type=int, default=2, help="size of the pool")
p.add_argument("--max_iters", type=int, default=5)
args = p.parse_args()
mylib.configure(size=args.pool)
w = torch.zeros(3, requires_grad=True)
opt = torch.optim.SGD([w], lr=0.1)
for it in range(args.max_iters):
    (w - 1).pow(2).sum().backward()
    opt.step()
"""


@pytest.fixture
def keyed(tmp_path, monkeypatch):
    with MessagesServer() as server:
        monkeypatch.setenv("HOME", str(tmp_path / "home"))
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test")
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
        monkeypatch.setenv("INFRARSI_LLM_MAX_RETRIES", "0")
        repo = tmp_path / "repo"
        repo.mkdir()
        (repo / "train.py").write_text(textwrap.dedent(SCRIPT))
        yield server, repo


def test_a_claim_is_recorded_but_the_knob_stays_locked(keyed):
    server, repo = keyed
    server.script(tool_use_reply(TOOL_NAME, {"claims": [
        {"name": "pool", "role": "threads", "evidence": "mylib.configure(size=args.pool)"}]}))
    result = init(repo, budget_bytes=2**30)
    assert result.ok, result.message
    assert result.claims == [{"name": "pool", "role": "threads", "evidence": "mylib.configure(size=args.pool)",
                              "status": "unconfirmed", "why": "needs a measurement"}]
    pool = result.contract.knob("pool")
    assert pool.role == "unknown" and not pool.tunable
    [request] = server.requests
    tool = request.body["tools"][0]
    assert request.body["tool_choice"] == {"type": "tool", "name": TOOL_NAME}
    assert tool["input_schema"]["properties"]["claims"]["items"]["properties"]["name"]["enum"] == ["pool"]
    assert "mylib.configure(size=args.pool)" in request.body["messages"][0]["content"]


@pytest.mark.parametrize("bad", [
    {"claims": [{"name": "lr", "role": "threads", "evidence": "x"}]},
    {"claims": [{"name": "pool", "role": "turbo", "evidence": "x"}]},
    {"claims": [{"name": "pool", "role": "threads", "evidence": "x", "extra": 1}]},
    {"claims": [], "more": True},
])
def test_a_malformed_reply_changes_nothing(keyed, bad):
    server, repo = keyed
    server.script(tool_use_reply(TOOL_NAME, bad))
    result = init(repo, budget_bytes=2**30)
    assert result.ok and result.claims == []
    assert any("malformed reply" in w for w in result.warnings)


def trial(*, tokens=512, peak=100 * 2**20, step=0.1, losses=(2.0, 1.9, 1.8)) -> TrialResult:
    return TrialResult(status=TrialStatus.OK, candidate=Candidate(), step_times=[step] * 3, losses=list(losses),
                       tokens_per_step=tokens, peak_bytes=peak)


def test_measurements_confirm_or_refute_a_claim():
    base = trial()
    micro = Claim("mb", "micro_batch", "x.view(mb, T)")
    assert judge(micro, base, trial(peak=150 * 2**20), 1e-4).status == "confirmed"
    assert judge(micro, base, trial(tokens=1024, peak=150 * 2**20), 1e-4).status == "refuted"
    assert judge(micro, base, trial(), 1e-4).status == "refuted"  # memory did not move
    threads = Claim("pool", "threads", "configure(size=pool)")
    assert judge(threads, base, trial(step=0.07), 1e-4).status == "confirmed"
    assert judge(threads, base, trial(step=0.07, losses=(2.0, 1.5, 1.2)), 1e-4).status == "refuted"
    assert judge(threads, base, trial(step=0.1), 1e-4).status == "refuted"
    locked = Claim("seed2", "workload", "manual_seed", status="confirmed")
    assert judge(locked, base, trial(tokens=1), 1e-4) is locked


def test_a_claimed_thread_count_is_judged_by_the_jobs_cpu_use_when_it_was_measured():
    def using(cores: float, step: float = 0.1) -> TrialResult:
        result = trial(step=step)
        result.interference = {"mean_job_cores": cores}
        return result

    threads = Claim("pool", "threads", "configure(size=pool)")
    # Step time alone is noisy; CPU use is what a thread count changes.
    assert judge(threads, using(1.9), using(1.0, step=0.1), 1e-4).status == "confirmed"
    moved_time_only = judge(threads, using(1.9), using(1.85, step=0.2), 1e-4)
    assert moved_time_only.status == "refuted" and "CPU use did not move" in moved_time_only.why
