"""A DDP job tuned end to end: the ddp_gpt fixture under torchrun (gloo on CPU), init → doctor → run.

The search is narrowed to the launch shape, processes per node × threads per process (the rest
of the contract as init wrote it), and the editable scope to data.py, so no patch needs a
validation trial: six candidates, all run, including 2 × 1, 1 × 2 and the oversubscribed 2 × 2,
which the early abort must stop. Short runs (1 warm-up + 3 measured steps, a 30-step job, which
bounds re-verification's long runs) keep it under about three minutes on a quiet 2-core machine.
"""

from __future__ import annotations

import dataclasses

import pytest

from infrarsi.contract import VerifyPolicy, load_contract, save_contract

from .conftest import ROOT, cli, git_repo

pytestmark = pytest.mark.e2e
SHAPE = ("nproc_per_node", "threads")


def narrow(repo, keep: tuple[str, ...]) -> None:
    """Tune only ``keep`` (the user's choice; the contract is re-hashed like init writes it), and
    re-verify the best candidate alone, in at most 3 rounds: the launch shape is this test's subject."""
    contract = load_contract(repo)
    knobs = [k if k.name in keep or not k.tunable else dataclasses.replace(k, tunable=False) for k in contract.knobs]
    save_contract(dataclasses.replace(contract, knobs=knobs, verify=VerifyPolicy(candidates=1, most_rounds=3)), repo)


def shape(candidate: dict) -> tuple[int, int]:
    knobs = candidate["knobs"]
    procs = int(knobs["nproc_per_node"])
    threads = int(knobs["threads"]) or (1 if procs > 1 else 2)  # 0: torch's default on 2 cores
    return procs, threads


@pytest.mark.timeout(900)
def test_ddp_shape_tuned_end_to_end(tmp_path):
    repo = git_repo(tmp_path / "ddp", ROOT / "fixtures" / "ddp_gpt")
    (repo / "README.md").write_text((ROOT / "fixtures" / "ddp_gpt" / "README.md").read_text())
    init = cli("init", str(repo), "--scope", "data.py", "--warmup-steps", "1", "--measured-steps", "3",
               "--planned-steps", "30", "--budget-gib", "6")
    contract = load_contract(repo)
    assert contract.workload.launcher == "torchrun", init
    assert {1, 2} <= set(contract.knob("nproc_per_node").domain)
    assert {1, 2} <= set(contract.knob("threads").domain)
    narrow(repo, SHAPE)
    assert sorted(k.name for k in load_contract(repo).tunable) == sorted(SHAPE)

    doctor = cli("doctor", str(repo), "--repeats", "2")
    assert "communication" in doctor["phases"]["phases"], doctor["phases"]  # the loss all-reduce, timed by the probe
    baseline_procs = int(load_contract(repo).knob("nproc_per_node").default)
    assert doctor["memory"]["ranks"] == baseline_procs

    result = cli("run", str(repo), "--trials", "6", "--no-bank", timeout=840)
    assert result["status"] in ("ok", "no_promotion"), result["message"]
    rows = [t for t in result["trials"] if t["kind"] in ("baseline", "search")]
    tried = {shape(t["candidate"]): t for t in rows}
    assert (2, 1) in tried and (1, 2) in tried, sorted(tried)
    # Every trial ended with a status and a cost; the oversubscribed shape did not wedge the run.
    assert all(t["wall_s"] > 0 for t in result["trials"])
    over = [t for t in rows if shape(t["candidate"]) == (2, 2)]
    for t in over:
        assert t["status"] in ("ok", "aborted_slow", "timeout"), t
    ok = {s: t["step_s"] for s, t in tried.items() if t["status"] == "ok"}
    # Memory is measured per rank and the budget applies to the largest.
    for (procs, _), t in tried.items():
        if t["status"] == "ok":
            assert len(t["rank_peak_bytes"]) == procs and t["peak_bytes"] == max(t["rank_peak_bytes"]), t
    assert (2, 1) in ok or (1, 2) in ok, tried
    # The contract's [verify]: the baseline ran at most three rounds, a short and a long run each.
    baseline = next(t["candidate"] for t in rows if t["kind"] == "baseline")
    base_runs = [t for t in result["trials"] if t["kind"] == "verification" and t["candidate"] == baseline
                 and t["rerun_of"] is None]
    assert len(base_runs) <= 2 * 3 and (len(base_runs) >= 2 or not result["verdicts"]), [t["reason"] for t in base_runs]
