"""Every forgery in forgeries.py, served as a model's proposal by the loopback Messages server and
run through a real ``infrarsi run`` (search and re-verification): each must end with a named
reason and none may be promoted, while the honest proposal passes every check (validated).

A request takes at most MAX_PATCHES proposals, so the cases go in several runs of the same study
(another model name is another question); the baseline is measured once. The table the test
prints (``pytest -s``) is the issue's: case, status, reason, promoted.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from infrarsi.contract import VerifyPolicy, load_contract, save_contract
from infrarsi.patches.llm_proposals import MAX_PATCHES, TOOL_NAME, diff_id
from tests.adversarial.conftest import infrarsi_run
from tests.adversarial.forgeries import CASES
from tests.support.messages_server import MessagesServer, tool_use_reply

pytestmark = pytest.mark.e2e


def _proposal(case, diff: str) -> dict:
    return {"title": case.name, "rationale": case.forges, "diff": diff}


def test_every_forgery_is_caught_and_the_honest_proposal_promoted(job, tmp_path):
    # Each forgery must be refused by its patch check, before re-verification: one candidate, at most
    # three rounds, is all the honest proposal needs here.
    save_contract(replace(load_contract(job), verify=VerifyPolicy(candidates=1, most_rounds=3)), job)
    reference = load_contract(job).loss.reference
    assert len(reference) == 5
    diffs = {case.name: case.build(job, reference) for case in CASES}
    names = {case.name: f"llm:{diff_id(diffs[case.name])}" for case in CASES}
    groups = [CASES[i:i + MAX_PATCHES] for i in range(0, len(CASES), MAX_PATCHES)]

    rows: dict[str, tuple[str, str]] = {}
    promoted: list[list[str]] = []
    outcomes: list[str] = []
    with MessagesServer() as server:
        for number, group in enumerate(groups):
            server.script(tool_use_reply(TOOL_NAME, {"patches": [_proposal(c, diffs[c.name]) for c in group]}))
            result = infrarsi_run(job, server.url, f"claude-adversary-{number}", trials=4, home=tmp_path / "home")
            assert result["status"] in ("ok", "no_promotion"), result["message"]
            checks = {c["name"]: c for c in result["patch_checks"]}
            for case in group:
                check = checks[names[case.name]]
                rows[case.name] = (check["status"], check["reason"])
            if result["promoted"]:
                promoted.append(result["promoted"]["candidate"]["patches"])
            outcomes.append(f"run {number}: {result['message']} " + "; ".join(
                f"{v['candidate']['patches']}: {v['reason']}" for v in result["verdicts"]))
        # one patch request per run (the priors' requests find no scripted reply: built-in priors)
        asked = [r for r in server.requests if r.body["tool_choice"]["name"] == TOOL_NAME]
        assert len(asked) == len(groups)
        for request in server.requests:  # the references the forgeries print were never sent
            assert not any(repr(x) in request.body["messages"][0]["content"] for x in reference)

    promoted_names = {name for patches in promoted for name in patches}
    print("\n" + "\n".join(outcomes))
    print("\ncase | status | promoted | reason")
    for case in CASES:
        status, reason = rows[case.name]
        print(f"{case.name} | {status} | {'yes' if names[case.name] in promoted_names else 'no'} | {reason[:150]}")

    for case in CASES:
        status, reason = rows[case.name]
        if case.honest:
            # It passes every check; whether it is promoted is its measured speed's business (on
            # this CPU, at low load, batching 16 small heads is not reliably faster: see the table).
            assert status == "validated", (case.name, reason, outcomes)
        else:
            assert status not in ("validated", "skipped") and reason.strip(), (case.name, status, reason)
            assert names[case.name] not in promoted_names, f"{case.name} was promoted"
